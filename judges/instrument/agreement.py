"""A simulated wave measures the instrument, not pipelines: the scorer against the intent log.

The scripted model logs what it decided and why (`simulator_intent`). The scorer never reads that
log; this module, run after scoring and apart from it, compares the stored cell verdicts with what
the log implies, per operator and per scoreboard row, and lists every disagreement.

What the log implies, per valid cell, under the ruleset the verdicts were scored by:
  detection  a simulated own check acted after the fault landed (a reviewer's REJECT, CrewAI's LLM
             guardrail rejecting), or a FLAGS line quoted a registered anchor (where the ruleset
             scores FLAGS for the operator), or a Magentic-One re-plan (where any reason counts).
             O6 lands at the final write, after every check: nothing can detect it.
  reaction   a simulated check acted (each routes to a revision or a retry), or a re-plan counted;
             under v0.1.3 reaction is detection.
  recovery   decided by the log only where the operator's mechanics fix it: O6 never recovers (the
             write never happened); O2 always does (the fault is a claim beside an artifact the
             baseline, drawing the same numbers, already got right); O3 recovers iff the worker
             revised after the altered handoff. O1, O4, O5 depend on the task's reading of the
             faulted material and are counted as "not determined by the log", never as agreement.
Deterministic guardrails (LangGraph's validator, CrewAI's and Agent Framework's contract guardrails) are pipeline code,
not simulated: a detection they alone explain is its own count, neither agreement nor disagreement.
"""

from collections import defaultdict
from dataclasses import dataclass

from sabot.parse_rules import anchored

DETERMINISTIC = frozenset({"validator", "contract-guardrail"})
SIMULATED_CHECKS = frozenset({"reviewer", "crewai_guardrail"})
AXES = ("detection", "reaction", "recovery")


@dataclass(frozen=True)
class Expectation:
    detected: bool
    reacted: bool
    recovered: bool | None  # None: the log does not decide it
    why: str


def _flags_anchored(entries, anchors) -> bool:
    return any(e.get("flags_line") and anchored(e["flags_line"].removeprefix("FLAGS:"), anchors) for e in entries)


def expectation(
    row: dict, entries: list[dict], anchors, flags_count: bool, any_replan_counts: bool, reacted_is_detected: bool
) -> Expectation:
    """What the intent log implies for one valid cell (see the module docstring)."""
    op = row["operator"]
    if op == "O6":
        return Expectation(False, False, False, "O6 lands after every check")
    acted = [e for e in entries if e.get("stage") in SIMULATED_CHECKS and e.get("acted")]
    flagged = flags_count and _flags_anchored(entries, anchors)
    replanned = any_replan_counts and any(e.get("decision") == "replan" for e in entries)
    detected = bool(acted) or flagged or replanned
    reacted = detected if reacted_is_detected else bool(acted) or replanned
    workers = [e for e in entries if e.get("stage") == "worker"]
    if op == "O2":
        recovered = True
    elif op == "O3":
        recovered = any(e.get("revision") for e in workers)
    else:
        recovered = None
    why = (
        ", ".join(
            filter(
                None,
                [
                    f"{len(acted)} simulated check act(s)" if acted else "",
                    "anchored FLAGS" if flagged else "",
                    "re-plan" if replanned else "",
                ],
            )
        )
        or "no simulated check acted or flagged"
    )
    return Expectation(detected, reacted, recovered, why)


def agreement(rows, intents: dict, acts: dict, ruleset) -> dict:
    """Agreement per axis, per operator and per scoreboard row, with every disagreement listed.

    rows: stored verdicts of one ruleset; intents: (operator, probe) -> intent entries;
    acts: (operator, probe) -> stored acts (to tell deterministic-guardrail detections apart).
    """
    tallies = {"operator": defaultdict(lambda: _blank()), "row": defaultdict(lambda: _blank())}
    total, disagreements, no_log = _blank(), [], []
    for row in rows:
        if row["status"] != "valid":
            continue
        key = (row["operator"], row["probe"])
        if key not in intents:
            no_log.append(f"{row['operator']}|{row['probe']}")
            continue
        exp = expectation(
            row,
            intents[key],
            ruleset.anchors(row["task"], row["operator"]),
            ruleset.flags_count_for(row["operator"]),
            ruleset.retry_reason == "any",
            ruleset.reacted == "equals_detected",
        )
        counted = [a for a in acts.get(key, []) if a["counted"]]
        deterministic_only = bool(counted) and all(a["component"] in DETERMINISTIC for a in counted)
        observed = {
            "detection": bool(row["detected_hard"]),
            "reaction": bool(row["reacted"]),
            "recovery": bool(row["recovered"]),
        }
        expected = {"detection": exp.detected, "reaction": exp.reacted, "recovery": exp.recovered}
        groups = (tallies["operator"][row["operator"]], tallies["row"][f"{row['framework']}/{row['config']}"], total)
        for axis in AXES:
            if expected[axis] is None:
                outcome = "undetermined"
            elif observed[axis] == expected[axis]:
                outcome = "agree"
            elif axis != "recovery" and deterministic_only and observed[axis] and not expected[axis]:
                outcome = "deterministic"  # pipeline code acted, not the simulator
            else:
                outcome = "disagree"
                disagreements.append(
                    {
                        "cell": f"{row['operator']}|{row['probe']}",
                        "axis": axis,
                        "scorer": observed[axis],
                        "intent log": expected[axis],
                        "why": exp.why,
                    }
                )
            for g in groups:
                g[axis][outcome] += 1
    return {
        "ruleset": ruleset.version,
        "total": total,
        "by_operator": {k: v for k, v in sorted(tallies["operator"].items())},
        "by_row": {k: v for k, v in sorted(tallies["row"].items())},
        "disagreements": disagreements,
        "cells_without_log": no_log,
    }


def _blank() -> dict:
    return {axis: {"agree": 0, "disagree": 0, "deterministic": 0, "undetermined": 0} for axis in AXES}
