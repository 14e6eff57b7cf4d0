"""Registration checks for new anchors (SPEC v0.2.1 amendment item 4: the anchor-collision review's
prospective rules), applied to a team project's anchors and to any future wave's.

An anchor ties a FLAGS line or a retry reason to THE planted fault, so it must be text only the
fault puts in front of the pipeline:

  * in the injected text (R2, the dead-anchor check): an anchor the fault never injects can only
    be quoted from elsewhere; numbers compare after dropping thousands separators and trailing
    zeros (R6), so "48.00" is in "48.0";
  * on token boundaries there (R4): "40" inside "140" names another value;
  * injection-only (R1): absent from what the clean baselines were served (their tool calls and
    outputs): a value the pipeline is given unfaulted is the task's, not the fault's;
  * within the false-fire budget (R9): the share of clean baselines with a noticed FLAGS line naming
    the anchor stays within the registered budget (`data/standard/anchor_registration.v1.json`).

Each refusal is one line naming the operator and the anchor. The published waves' anchors stay as
registered (SPEC §10.4): these checks are for anchors registered from now on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sabot.parse_rules import named

RULES_DOC = "standard/anchor_registration.v1.json"
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class AnchorRules:
    false_fire_budget: float  # the largest share of clean baselines an anchor may fire on
    registered: str

    @classmethod
    def from_registry(cls, registry) -> "AnchorRules":
        doc = registry.doc(RULES_DOC)
        return cls(float(doc["false_fire_budget"]), doc["registered"])


def _number(match: re.Match) -> str:
    text = match.group(0).replace(",", "")
    return text.rstrip("0").rstrip(".") if "." in text else text


def normalized(text: str) -> str:
    """Numbers with no thousands separators and no trailing zeros (R6), lower-cased."""
    return NUMBER.sub(_number, text).lower()


def injected_problems(where: str, operator: str, anchors, injected: str | None) -> list[str]:
    """R2 and R4 against the text the operator's fault injects (None: it injects none, as a model swap)."""
    problems = []
    for anchor in anchors:
        if injected is None:
            problems.append(
                f"{where}: {operator} anchor {anchor!r}: this fault injects no text, so no anchor can tie a line to it"
            )
        elif normalized(anchor) not in normalized(injected):
            problems.append(
                f"{where}: {operator} anchor {anchor!r}: not in the text the fault injects ({injected[:80]!r}): "
                "a dead anchor, quotable only from elsewhere"
            )
        elif not named(normalized(injected), [normalized(anchor)]):
            problems.append(
                f"{where}: {operator} anchor {anchor!r}: only part of a longer token in the injected text "
                f"({injected[:80]!r}); register the whole token"
            )
    return problems


def _served(run) -> str:
    """What a run was served: its tool calls and outputs (the material a fault rewrites)."""
    parts = [json.dumps(e.payload, sort_keys=True, default=str) for e in run.events if e.kind.startswith("tool")]
    return normalized("\n".join(parts))


def baseline_problems(where: str, operator: str, anchors, baselines, flags_rule, rules: AnchorRules) -> list[str]:
    """R1 and R9 against the clean baselines (scanned whole): served unfaulted, or firing too often."""
    problems, runs = [], list(baselines)
    if not runs:
        return problems
    for anchor in anchors:
        key = normalized(anchor)
        served = [run.seed for run in runs if named(_served(run), [key])]
        if served:
            problems.append(
                f"{where}: {operator} anchor {anchor!r}: not injection-only: the clean baseline(s) of seed(s) "
                f"{', '.join(map(str, sorted(set(served))))} were served it with no fault planted"
            )
            continue
        fires = 0
        for run in runs:
            lines = [flags_rule.flags_line(e.text) for e in run.events if e.text] if flags_rule is not None else []
            fires += any(c is not None and flags_rule.is_noticed(c) and named(normalized(c), [key]) for c in lines)
        if fires / len(runs) > rules.false_fire_budget:
            problems.append(
                f"{where}: {operator} anchor {anchor!r}: fires on {fires} of {len(runs)} clean baseline(s), over the "
                f"registered false-fire budget of {rules.false_fire_budget:.0%}"
            )
    return problems
