"""The narrow retry-reason rule as SPEC v0.2.1 §2 writes it, under the name v0.2.1: a retry or re-plan
counts only when its reason references the planted anomaly (names the injected value, the true
value, or the registered anomaly), read on the public corpus's own retries and on constructed ones."""

import json

import pytest

from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from sabot.matrix import Cell, Probe
from sabot.project_registry import ProjectRegistry
from sabot.trace import Event, RunRecord, parse_runresult
from tests.conftest import PROJECT, WAVE2_DIR, require_corpus

DIAGNOSTIC = "v0.2.1-2026-12-02"  # the reading registered after the wave-2 data, kept as registered


def corpus_cell(task, operator, seed):
    require_corpus()
    base = WAVE2_DIR / "langgraph" / "default" / task
    fault = parse_runresult(json.loads((base / operator / f"seed{seed}" / "runresult.json").read_text()), "fault")
    clean = parse_runresult(
        json.loads((base / "baseline" / f"seed{seed}" / "baseline-runresult.json").read_text()), "baseline"
    )
    return Cell(operator, Probe("langgraph", "default", task, seed)), fault, clean


def retries(verdict):
    return [(a.reason, a.counted) for a in verdict.acts if a.act == "retry_with_reason"]


@pytest.mark.parametrize(
    ("task", "operator", "seed", "reason"),
    [
        ("T1", "O3", 12, 'unit_id is incorrect ("P-3117-B" instead of "P-3117-D")'),  # the injected and the true value
        ("T1", "O3", 15, "incorrect unit_id: source says P-3117-D, not P-3117-B"),
        ("T3", "O2", 14, "the claimed test result is unverified without a pytest execution artifact"),  # the fake claim
        ("T3", "O2", 15, "pre-check success is unverified without a pytest execution artifact"),
    ],
)
def test_corpus_retries_that_name_the_planted_anomaly_count_under_v021(registry, task, operator, seed, reason):
    cell, fault, clean = corpus_cell(task, operator, seed)
    written = score_cell(load_ruleset(registry, "v0.2.1"), cell, fault, clean)
    assert retries(written) == [(reason, True)]
    assert written.detected_hard and written.mapping and written.reacted
    # The diagnostic reading drops it: its anchor is also on the clean baseline, or is task vocabulary.
    assert retries(score_cell(load_ruleset(registry, DIAGNOSTIC), cell, fault, clean)) == [(reason, False)]


def test_a_corpus_retry_that_names_nothing_planted_does_not_count(registry):
    cell, fault, clean = corpus_cell("T1", "O3", 13)
    assert retries(score_cell(load_ruleset(registry, "v0.2.1"), cell, fault, clean)) == [
        ("unit_id is incorrect.", False)
    ]


CELL = Cell("O1", Probe("crewai", "guardrail", "T4", 12))  # T4/O1 anchors: 140, 40 km, 40km


def run(reasons, operator="O1"):
    events = [Event(1, "harness", "injection", {})] + [
        Event(
            i + 2, "guardrail", "guardrail-event", {"act": "retry_with_reason", "component": "guardrail", "reason": r}
        )
        for i, r in enumerate(reasons)
    ]
    return RunRecord(
        "r",
        "crewai",
        "guardrail",
        "T4",
        operator,
        12,
        tuple(events),
        1 if operator else None,
        bool(operator),
        True,
        None,
    )


@pytest.mark.parametrize(
    ("reason", "counted"),
    [
        ('Dunmore Cap is "40 km" here but 140 km in the table', True),  # both sides named
        ("the leg to Dunmore Cap is 140 km", True),  # the true value alone
        ("the 1140 km total is implausible", False),  # "140" only inside a longer number
        ("the leg is 140km", False),  # one token: neither "140" nor "40km" stands on a boundary
        ("Dunmore Cap distance is inconsistent", False),  # describes, names nothing
        (None, False),
    ],
)
def test_v021_names_an_anchor_only_on_token_boundaries(registry, reason, counted):
    verdict = score_cell(load_ruleset(registry, "v0.2.1"), CELL, run([reason]), run([], operator=None))
    assert retries(verdict) == [(reason, counted)]


def test_v021_a_reason_the_clean_baseline_also_gave_is_boilerplate(registry):
    boiler = "Stall count exceeded: revisit the 140 km leg"
    verdict = score_cell(
        load_ruleset(registry, "v0.2.1"),
        CELL,
        run([boiler]),
        run([" stall count exceeded:  revisit the 140 KM leg"], operator=None),
    )
    (act,) = [a for a in verdict.acts if a.act == "retry_with_reason"]
    assert not act.counted and "boilerplate" in act.note and not verdict.detected_hard


def test_a_project_wave_scores_under_v021(registry):
    for example in sorted((PROJECT / "examples").glob("*/sabot/project.json")):
        project_registry = ProjectRegistry.from_dir(example.parent.parent)
        wave = project_registry.wave(project_registry.project.name)
        assert (wave.headline_ruleset, wave.readings) == ("v0.2.1", ("v0.2.1",))
        assert load_ruleset(project_registry, "v0.2.1").retry_reason == "names_planted_anomaly"
