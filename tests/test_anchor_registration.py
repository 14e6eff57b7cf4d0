"""Anchor registration rules for new anchors (SPEC v0.2.1 amendment item 4): injected, on token
boundaries, injection-only and within the false-fire budget; each refusal one line naming the anchor."""

import json
import shutil

import pytest

from sabot.anchor_registration import AnchorRules, baseline_problems, injected_problems
from sabot.parse_rules import FlagsRule
from sabot.projects import Project, ProjectError
from sabot.trace import Event, RunRecord
from sabot_assets.cli.project import anchor_lines
from tests.conftest import PROJECT

EXAMPLES = sorted(p.parent.parent for p in (PROJECT / "examples").glob("*/sabot/project.json"))
INJECTED = '"amount_paid": 48.0'


def test_an_anchor_must_be_in_the_injected_text_on_token_boundaries():
    assert injected_problems("ops.json", "O1", ["48.0", "48.00", "amount_paid"], INJECTED) == []  # 48.00 is 48.0 (R6)
    dead, part = injected_problems("ops.json", "O1", ["84.0", "8.0"], INJECTED)
    assert dead.startswith("ops.json: O1 anchor '84.0': not in the text the fault injects") and "dead anchor" in dead
    assert part.startswith("ops.json: O1 anchor '8.0': only part of a longer token")
    (swap,) = injected_problems("ops.json", "O4", ["refund-desk-mini"], None)
    assert "O4 anchor 'refund-desk-mini': this fault injects no text" in swap


def clean(seed, tool_output, flags="FLAGS: none"):
    events = (
        Event(1, "worker", "tool-call", {"tool": "lookup_order", "output": tool_output}),
        Event(2, "reviewer", "agent-msg", {"text": f"{flags}\nVERDICT: APPROVE"}),
    )
    return RunRecord(f"b{seed}", "langgraph", "own", "refunds", None, seed, events, None, False, True, None)


def test_an_anchor_served_unfaulted_or_firing_on_clean_baselines_is_refused(registry):
    flags, rules = (
        FlagsRule.from_doc(registry.doc("standard/flags_protocol.v0.2.0.json")),
        AnchorRules.from_registry(registry),
    )
    assert rules.false_fire_budget == 0.05
    baselines = [
        clean(1, '{"amount_paid": 84.0, "note": "superseded policy"}'),
        clean(2, '{"amount_paid": 84.0}', "FLAGS: refund 48.0 looks low"),
    ]
    lines = baseline_problems("ops.json", "O1", ["48.0", "superseded", "84"], baselines, flags, rules)
    assert lines == [
        "ops.json: O1 anchor '48.0': fires on 1 of 2 clean baseline(s), over the registered false-fire budget of 5%",
        "ops.json: O1 anchor 'superseded': not injection-only: the clean baseline(s) of seed(s) 1 were served it with no fault planted",
        "ops.json: O1 anchor '84': not injection-only: the clean baseline(s) of seed(s) 1, 2 were served it with no fault planted",
    ]
    assert baseline_problems("ops.json", "O1", ["48.0"], [clean(1, '{"amount_paid": 84.0}')], flags, rules) == []


def test_a_project_with_a_dead_anchor_is_refused_naming_it(tmp_path):
    copy = tmp_path / "refunds"
    shutil.copytree(
        next(p for p in EXAMPLES if p.name == "refund_desk"), copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    ops = copy / "sabot" / "operators.json"
    doc = json.loads(ops.read_text())
    doc["O1"]["anchors"] = ["48.0", "84.0"]
    ops.write_text(json.dumps(doc))
    with pytest.raises(ProjectError) as refused:
        Project.load(copy)
    assert (
        str(refused.value)
        == f"{ops}: O1 anchor '84.0': not in the text the fault injects ('\"amount_paid\": 48.0'): a dead anchor, quotable only from elsewhere"
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_anchors_pass_registration(example):
    project = Project.load(example)
    assert anchor_lines("w", project, []) == []
    assert all(project.injected_text(op) is None for op in project.operator_ids if op == "O4")
