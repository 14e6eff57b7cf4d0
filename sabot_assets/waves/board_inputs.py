"""Whether a reading's board would come out as its last build left it: a digest of its inputs.

The scoreboard builds one board per reading of the wave. A new rule is a new later reading
(`later_readings`), and it changes only that reading's verdicts: every other board's inputs (its
verdicts and acts, the wave's runs, the judge's verdicts, the label, its own rule files and the
rest of the registry, and the code that builds a board) are as they were, and a board is a
deterministic function of them (and the headline's metadata of what it prints beside the board:
the addresses its links use and whether the judge runs by itself). Such a board is kept, not built again; its digest is stored beside it (a
`reports` row per reading) in the transaction that writes it.
"""

import functools
import hashlib
import json
from pathlib import Path

from sabot.registry import Registry, WaveDef
from sabot.store.db import rows_digest, rows_digests
from sabot.store.verdicts import ACT_COLUMNS, VERDICT_COLUMNS
from sabot_assets.constants import BOARD_VERSION
from sabot_assets.file_server.addresses import files_url
from sabot_assets.waves.judging import judge_runs_by_itself
from sabot_assets.waves.ui_links import ui_base

BOARD_INPUTS = "board.inputs"  # the reports row holding the digest a reading's stored board was built from
INPUTS_KEY = "board inputs (headline)"  # the scoreboard's metadata entry: the headline board's digest

_VERDICTS = ", ".join(c for c in VERDICT_COLUMNS if c != "dagster_run_id")
_ACTS = ", ".join(ACT_COLUMNS)
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# What builds a board and its metadata, and what it derives from the runs (the label, the quotes'
# locations), besides the rules (whose hashes carry the scorer's code).
_BOARD_CODE = (
    "judges",
    "sabot_assets/waves",
    "sabot/provenance.py",  # the label (`kept_derivations`)
    "sabot/store/published.py",
    "sabot/store/runs.py",
    "sabot/store/verdicts.py",
    "sabot/trace.py",
)


@functools.cache
def board_code_hash() -> str:
    """The source of what builds a board, hashed once per process."""
    digest = hashlib.sha256()
    for rel in _BOARD_CODE:
        path = _PACKAGE_ROOT / rel
        for file in sorted(p for p in path.rglob("*") if p.suffix in (".py", ".j2")) if path.is_dir() else [path]:
            digest.update(file.relative_to(_PACKAGE_ROOT).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def runs_digest(con, wave: str) -> str:
    """The wave's runs by content: a run stored again from the same record keeps it."""
    return rows_digest(con, "runs", "operator, probe, status, coalesce(source_sha256, '')", "wave = ?", [wave])


def judge_digest(con, wave: str) -> str:
    """The judge's verdicts, by the run that wrote them."""
    columns = "operator, probe, CAST(prompt_variant AS VARCHAR), dagster_run_id"
    return rows_digest(con, "judge_verdicts", columns, "wave = ?", [wave])


def board_inputs(con, registry: Registry, wave: WaveDef, rulesets, floors: dict, label: str) -> dict[str, str]:
    """reading -> the digest of what its board is built from, as the store and registry hold it now."""
    shared = {
        "board": BOARD_VERSION,
        "code": board_code_hash(),
        "label": label,
        # What the headline's metadata prints besides the board: its links' addresses, the judge's kind.
        "addresses": [ui_base(), files_url()],
        "judge runs by itself": judge_runs_by_itself(wave),
        "runs": runs_digest(con, wave.name),
        "judge": judge_digest(con, wave.name),
    }
    by_version = {r.version: r for r in rulesets}
    verdicts = rows_digests(con, "cell_verdicts", _VERDICTS, "ruleset", "wave = ?", [wave.name])
    acts = rows_digests(con, "acts", _ACTS, "ruleset", "wave = ?", [wave.name])
    every_rule_file = set().union(*(r.files for r in rulesets))
    out = {}
    for ruleset in rulesets:
        floor = by_version[floors[ruleset.version].source]
        mine = set(ruleset.files) | set(floor.files)
        doc = {
            **shared,
            "ruleset": ruleset.hash,
            "floor": floor.hash,
            # The registry, less the files only other readings use: adding a later reading leaves this board's inputs.
            "registry": registry.content_hash_without(every_rule_file - mine),
            # By content, not by the run that wrote them: the same verdicts written again keep the board.
            "verdicts": verdicts[ruleset.version],
            "acts": acts[ruleset.version],
        }
        out[ruleset.version] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return out
