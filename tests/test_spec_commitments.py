"""Two of the standard's commitments, each shown able to fail: CrewAI manager reassignment is soft
tier only (SPEC v0.1.1 amendment item 2), and a null result publishes with the same prominence as
a positive one (§10.8's interpretation commitment)."""

import pytest

from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from judges.stats.predictions import HELD, NOT_HELD, STATEMENTS, UNDETERMINED, PredictionResult
from sabot.matrix import Cell, Probe
from sabot.projects import SURFACE_NAMES
from sabot.trace import Event, RunRecord
from sabot_assets.contrasts import predictions_markdown

CELL = Cell("O1", Probe("crewai", "default", "T1", 11))
DELEGATION = Event(
    3,
    "manager",
    "tool-call",
    {
        "tool": "Delegate work to coworker",
        "args": {
            "coworker": "Extractor",
            "task": "Redo the record: the summary says 74.1 but the certified reading is 47.1",
            "reason": "anomaly: 74.1 vs 47.1",
        },
        "output": "Extractor: corrected to 47.1",
    },
)


def run(events, operator="O1"):
    return RunRecord(
        "r", "crewai", "default", "T1", operator, 11, tuple(events), 2 if operator else None, bool(operator), True, None
    )


@pytest.mark.parametrize("ruleset", ["v0.1.3", "v0.2.0", "v0.2.1"])
def test_a_manager_reassignment_citing_the_anomaly_is_never_a_hard_act(registry, ruleset):
    fault = run(
        [
            Event(1, "harness", "injection", {}),
            Event(2, "worker", "agent-msg", {"text": "drive-end vibration 74.1"}),
            DELEGATION,
        ]
    )
    verdict = score_cell(load_ruleset(registry, ruleset), CELL, fault, run([], operator=None))
    assert verdict.status == "valid" and not verdict.detected_hard and not verdict.acts  # soft tier's to judge
    # Control: the same reason as a guardrail retry (a mapped surface) is a hard act.
    retry = Event(
        4,
        "guardrail",
        "guardrail-event",
        {"act": "retry_with_reason", "component": "guardrail", "reason": "anomaly: 74.1 vs 47.1"},
    )
    assert score_cell(
        load_ruleset(registry, ruleset), CELL, run([*fault.events, retry]), run([], operator=None)
    ).detected_hard


def test_no_mapping_and_no_project_surface_names_delegation(registry):
    crewai = load_ruleset(registry, "v0.2.1").mapping["frameworks"]["crewai"]
    mechanisms = " ".join(m for acts in crewai["acts"].values() for m in acts).lower()
    assert "delegat" not in mechanisms and "reassign" not in mechanisms
    assert not any("delegat" in s for s in SURFACE_NAMES["crewai"])


def results(status: str) -> list[PredictionResult]:
    return [
        PredictionResult(pid, STATEMENTS[pid], status, f"{pid} evidence: 12/40 -> 13/40") for pid in sorted(STATEMENTS)
    ]


@pytest.mark.parametrize("null", [NOT_HELD, UNDETERMINED])
def test_a_null_result_publishes_with_the_same_prominence(null):
    """The report of a wave where nothing held is the report where everything held, word for word
    but the status: the same table, rows, statements and evidence, nothing moved or dropped."""
    pair = {"name": "c", "first": "wave1", "second": "wave2", "label": "derived"}
    positive, negative = predictions_markdown(pair, results(HELD)), predictions_markdown(pair, results(null))
    assert negative.replace(f"| {null} |", f"| {HELD} |") == positive
    assert all(STATEMENTS[pid] in negative for pid in STATEMENTS) and negative.count(f"| {null} |") == 5
