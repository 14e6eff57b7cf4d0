"""A registry copied to a temp directory, with a new ruleset whose anchors file changes one anchor."""

import json
import shutil
from pathlib import Path

from sabot.registry import DATA_DIR, Registry

NEW_RULESET = "v0.2.0-x1"  # v0.2.0 with one T1/O2 anchor replaced
CHANGED = ("T1", "O2", "no issues", "no open issues")  # task, operator, old anchor, new anchor


def copy_registry(tmp: Path) -> Path:
    root = tmp / "data"
    shutil.copytree(DATA_DIR, root)
    return root


def add_one_anchor_ruleset(root: Path, rescores=("public_wave2",)) -> Registry:
    """Register anchors + ruleset files that differ from v0.2.0 in exactly one anchor, read by `rescores`."""
    task, op, old, new = CHANGED
    anchors = json.loads((root / "standard" / "anchors.v0.2.0.json").read_text())
    sets = anchors["anchors"][task][op]
    sets[sets.index(old)] = new
    anchors["version"] = "v0.2.0-x1"
    (root / "standard" / "anchors.v0.2.0-x1.json").write_text(json.dumps(anchors, indent=1))
    ruleset = json.loads((root / "rulesets" / "v0.2.0.json").read_text())
    ruleset.update(
        version=NEW_RULESET,
        summary=f"v0.2.0 with the {task}/{op} anchor {old!r} replaced by {new!r}.",
        rescores=list(rescores),
    )
    ruleset["uses"]["anchors"] = "anchors.v0.2.0-x1.json"
    (root / "rulesets" / f"{NEW_RULESET}.json").write_text(json.dumps(ruleset, indent=1))
    Registry(root).write_lock()
    registry = Registry(root)
    registry.require_registered()
    return registry


def edit_registered_file(root: Path, rel: str = "standard/anchors.v0.2.0.json") -> None:
    """Edit a registered file in place, as a user might by mistake: one anchor changed."""
    path = root / rel
    path.write_text(path.read_text().replace('"no issues"', '"no issue"', 1))
