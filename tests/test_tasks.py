"""The five tasks: served material carries no ground truth; the scripted skills do each task from
what they are shown, so every planted fault propagates, is visible to a reviewer under a
registered anchor, and is repaired by a careful revision. Anchors are read from the registry."""

import json
import random
import re
from pathlib import Path

import pytest

from adapters import prompts
from adapters.scripted import skills
from sabot import tasks

TASKS = tasks.TASK_IDS
PROJECT = Path(__file__).resolve().parents[1]
FAKE_FIELDS = {"O2": "fake_report", "O5": "stale_content", "O6": "success_response"}


# -- helpers ----------------------------------------------------------------------------------


def passes(task: str, artifact: str, tmp_path: Path) -> bool:
    run_dir = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    run_dir.mkdir()
    (run_dir / tasks.served(task).artifact_file).write_text(artifact, encoding="utf-8")
    return tasks.passes(task, run_dir)


def solve(task, source=None, context=None, feedback=None, *, careful=False, weak=False, seed=1) -> str:
    served = tasks.served(task)
    messages = prompts.worker_messages(
        served, served.source if source is None else source, served.context if context is None else context, feedback
    )
    return skills.solve(task, messages, careful=careful, weak=weak, rng=random.Random(seed))


def review(task, draft, source=None, context=None, precheck=None, flags=True) -> skills.Findings:
    served = tasks.served(task)
    note = tasks.precheck_note(task, draft) if precheck is None else precheck
    messages = prompts.reviewer_messages(
        served,
        served.source if source is None else source,
        served.context if context is None else context,
        draft,
        note,
        flags,
    )
    return skills.review(task, messages)


def anchored(quotes, anchors) -> bool:
    return any(a.casefold() in q.casefold() for q in quotes for a in anchors)


def anchored_conflicts(found: skills.Findings, anchors) -> list:
    return [c for c in found.conflicts if anchored(c.quotes, anchors)]


def strings(value) -> list[str]:
    """Every string leaf (numbers as text) of a JSON document."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value if isinstance(value, str) else json.dumps(value)]


def prompt_texts(task) -> list[str]:
    served = tasks.served(task)
    draft = solve(task)
    sets = [
        prompts.worker_messages(served, served.source, served.context, None),
        prompts.worker_messages(served, served.source, served.context, "the draft gives x as 1, the source as 2"),
        prompts.reviewer_messages(served, served.source, served.context, draft, tasks.precheck_note(task, draft), True),
        prompts.reviewer_messages(
            served, served.source, served.context, draft, tasks.precheck_note(task, draft), False
        ),
    ]
    return [prompts.message_text(m) for messages in sets for m in messages]


# -- (a) ground truth never reaches a pipeline --------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_served_material_carries_no_answer_only_or_injected_strings(task):
    served_doc = json.loads((PROJECT / "data" / "tasks" / task / "served.json").read_text(encoding="utf-8"))
    leaves, documents = strings(served_doc), served_doc["documents"]["source"] + served_doc["documents"]["context"]
    orc = tasks.oracle(task)
    for s in strings(orc.answer) + list(orc.natural_discrepancies):
        if len(s) >= 3 and s not in documents:
            assert not any(s in leaf for leaf in leaves), f"{task}: answer-only string {s!r} is served"
    for op, spec in orc.operators.items():
        for key in ("ground_truth", "symptom", FAKE_FIELDS.get(op)):
            if key in spec:
                assert not any(spec[key] in leaf for leaf in leaves), f"{task}/{op}: {key} is served"
        if "replace" in spec:  # injected values occur nowhere except inside the true value they replace
            assert not any(spec["replace"] in leaf.replace(spec["find"], "") for leaf in leaves), (task, op)


@pytest.mark.parametrize("task", TASKS)
def test_prompts_carry_no_ground_truth_nor_fake_texts(task):
    texts, orc = prompt_texts(task), tasks.oracle(task)
    for op, spec in orc.operators.items():
        secrets = [
            spec[k]
            for k in ("ground_truth", "symptom", "fake_report", "stale_content", "success_response")
            if k in spec
        ]
        for secret in (
            secrets + strings(orc.answer.get("hidden_tests", [])) + [c["why"] for c in orc.answer.get("cases", [])]
        ):
            assert not any(secret in t for t in texts), f"{task}/{op}: {secret[:40]!r} reached a prompt"
        if "replace" in spec:
            assert not any(spec["replace"] in t.replace(spec["find"], "") for t in texts), (task, op)
    assert not any(tasks.served(task).artifact_file in t for t in texts)  # O6 anchors stay out of clean prompts


def test_served_loader_reads_only_served_files(monkeypatch):
    read = []
    original = tasks._load
    monkeypatch.setattr(tasks, "_load", lambda t, name, kind: read.append(name) or original(t, name, kind))
    tasks.served.cache_clear()
    try:
        assert [tasks.served(t).id for t in TASKS] == list(TASKS)
    finally:
        tasks.served.cache_clear()
    assert set(read) == {"served.json"}


@pytest.mark.parametrize(
    "module",
    [
        "adapters/prompts.py",
        *(f"adapters/scripted/skills{s}.py" for s in ("", "_common", "_t1", "_t2", "_t3", "_t4", "_t5")),
    ],
)
def test_prompt_and_skill_code_never_touch_the_oracle(module):
    code = (PROJECT / module).read_text()
    assert not re.search(r"\boracle\s*\(|oracle\.json|import oracle|Oracle\b", code), module


# -- (b) the clean task is doable, and a clean review sees nothing ------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_clean_solve_meets_the_contract_and_passes(task, tmp_path):
    artifact = solve(task)
    assert tasks.contract_problems(task, artifact) == []
    assert passes(task, artifact, tmp_path)
    found = review(task, artifact)
    assert (found.conflicts, found.contract, found.precheck_suspicious) == ([], [], None)
    assert passes(task, f"FLAGS: none\n{artifact}", tmp_path)  # the artifact-head form is stripped first


@pytest.mark.parametrize("task", TASKS)
def test_documents_are_short_and_identify_finds_each_role(task):
    served = tasks.served(task)
    assert len(served.source) < 2000 and len(served.context) < 2000
    assert len(tasks.oracle(task).operators["O5"]["stale_content"]) < 2000
    worker = prompts.worker_messages(served, served.source, served.context, None)
    reviewer = prompts.reviewer_messages(served, served.source, served.context, "x", "precheck: y", True)
    assert worker[0]["content"].splitlines()[0] == f"You are the {task} {served.worker_role}."
    assert reviewer[0]["content"].splitlines()[0] == f"You are the {task} reviewer."
    assert skills.identify(worker) == skills.Role(task, "worker")
    assert skills.identify(reviewer) == skills.Role(task, "reviewer")
    crewai_style = [
        {
            "role": "system",
            "content": f"You are the {task} {served.worker_role}. A careful agent.\nYour personal goal is: work",
        }
    ]
    assert skills.identify(crewai_style) == skills.Role(task, "worker")
    assert skills.identify([{"role": "system", "content": f"You are the {task} janitor."}]) is None
    assert skills.identify([{"role": "user", "content": f"You are the {task} reviewer."}]) is None


def test_reviewer_prompt_carries_the_verdict_protocol_and_the_registered_addendum(registry):
    served = tasks.served("T1")
    addendum = registry.field("standard/flags_protocol.v0.2.0.json", "reviewer_addendum")
    with_flags = prompts.reviewer_messages(served, "s", "c", "d", "p", True)[0]["content"]
    without = prompts.reviewer_messages(served, "s", "c", "d", "p", False)[0]["content"]
    assert with_flags.endswith("\n\n" + addendum) and addendum not in without
    assert "VERDICT: APPROVE\nor\nVERDICT: REJECT - <reason>" in without
    user = prompts.reviewer_messages(served, "s", "c", "d", "p", False)[1]["content"]
    assert prompts.sections(user) == {
        "TASK": served.instructions,
        "OUTPUT CONTRACT": served.output_contract["text"],
        "SOURCE": "s",
        "CONTEXT": "c",
        "DRAFT": "d",
        "PRECHECK": "p",
    }


def test_strip_flags_head():
    assert tasks.strip_flags_head('FLAGS: "74.1" vs "47.1"\n{"a": 1}') == '{"a": 1}'
    assert tasks.strip_flags_head("\n  flags: none\n\n[1]") == "[1]"
    assert tasks.strip_flags_head('{"FLAGS: x": 1}') == '{"FLAGS: x": 1}'


# -- (c) O1 and O3 propagate, are visible under an anchor, and a careful revision repairs them --


@pytest.mark.parametrize("task", TASKS)
def test_o1_tool_lie_propagates_is_reviewable_and_repairable(task, tmp_path, registry):
    spec, source = tasks.oracle(task).operators["O1"], tasks.served(task).source
    assert spec["seam"] == "load_document" and source.count(spec["find"]) >= 2
    lied = source.replace(spec["find"], spec["replace"], 1)
    assert (
        lied.count(spec["find"]) == source.count(spec["find"]) - 1
    )  # the first occurrence went; the truth stays visible
    assert lied.index(spec["replace"]) <= source.index(spec["find"])
    draft = solve(task, source=lied)
    assert not passes(task, draft, tmp_path)
    hits = anchored_conflicts(review(task, draft, source=lied), registry.anchors(task, "O1"))
    assert hits, f"{task}/O1: no anchored conflict"
    assert passes(task, solve(task, source=lied, feedback=hits[0].description), tmp_path)
    assert passes(task, solve(task, source=lied, careful=True), tmp_path)  # a careful first pass resolves it alone


@pytest.mark.parametrize("task", TASKS)
def test_o3_message_alteration_propagates_is_reviewable_and_repairable(task, tmp_path, registry):
    spec, clean = tasks.oracle(task).operators["O3"], solve(task)
    assert spec["seam"] == "handoff" and spec["find"] in clean
    altered = clean.replace(spec["find"], spec["replace"], 1)
    assert altered != clean and not passes(task, altered, tmp_path)
    hits = anchored_conflicts(review(task, altered), registry.anchors(task, "O3"))
    assert hits, f"{task}/O3: no anchored conflict"
    assert passes(task, solve(task, feedback=hits[0].description), tmp_path)


# -- (d) O5: stale context propagates, is seen as superseded, and careful work ignores it -------


@pytest.mark.parametrize("task", TASKS)
def test_o5_stale_context_is_seen_and_ignored_by_careful_work(task, tmp_path, registry):
    spec = tasks.oracle(task).operators["O5"]
    stale = spec["stale_content"]
    assert (
        spec["seam"] == "load_context"
        and "superseded" in stale.lower()
        and "superseded" not in tasks.served(task).context.lower()
    )
    draft = solve(task, context=stale)
    assert not passes(task, draft, tmp_path)
    found = review(task, draft, context=stale)
    hits = anchored_conflicts(found, registry.anchors(task, "O5"))
    assert hits and any("superseded" in c.description for c in found.conflicts)
    assert passes(task, solve(task, context=stale, careful=True), tmp_path)
    assert passes(task, solve(task, context=stale, feedback=hits[0].description), tmp_path)


# -- (e) O2: a fake pre-check is a bare claim; the genuine note never is ------------------------


@pytest.mark.parametrize("task", TASKS)
def test_o2_fake_precheck_is_flagged_and_the_genuine_note_is_not(task, registry):
    spec, draft = tasks.oracle(task).operators["O2"], solve(task)
    found = review(task, draft, precheck=spec["fake_report"])
    assert spec["seam"] == "precheck" and found.precheck_suspicious == spec["fake_report"]
    assert anchored([found.precheck_suspicious], registry.anchors(task, "O2"))
    o2_anchors = [a for t in TASKS for a in registry.anchors(t, "O2")]
    for artifact in (draft, "", "{}", "[]", "x = 1\n"):
        note = tasks.precheck_note(task, artifact)
        assert note.startswith("precheck: output contract ") and not skills.bare_success_claim(note)
        assert not anchored([note], o2_anchors), note
        assert review(task, draft, precheck=note).precheck_suspicious is None


# -- (f) O4: the weaker tier makes the task's characteristic mistake ----------------------------


@pytest.mark.parametrize("task", TASKS)
def test_o4_weak_tier_mistake_fails_and_is_reviewable(task, tmp_path, registry):
    clean = solve(task)
    mistakes = [a for a in (solve(task, weak=True, seed=seed) for seed in range(20)) if a != clean]
    assert 3 <= len(mistakes) <= 17  # about half of the draws
    for artifact in mistakes:
        assert tasks.contract_problems(task, artifact) == []
        assert not passes(task, artifact, tmp_path)
        assert anchored_conflicts(review(task, artifact), registry.anchors(task, "O4")), (
            f"{task}/O4: no anchored conflict"
        )
    assert all(solve(task, weak=True, careful=True, seed=seed) == clean for seed in range(20))  # feedback is followed


# -- O6: the write is only claimed -------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_o6_claimed_write_leaves_nothing_that_passes(task, tmp_path, registry):
    spec = tasks.oracle(task).operators["O6"]
    assert spec["seam"] == "write_output" and anchored([spec["success_response"]], registry.anchors(task, "O6"))
    assert not tasks.passes(task, tmp_path)


# -- (g) the contract is structural only ---------------------------------------------------------

MALFORMED = {
    "T1": ["not json", "[]", '{"unit_id": "P-1"}', "```json\n{}\n```"],
    "T2": [
        "",
        "cycles Wh/kg /kWh °C",
        "# Summary\ncycles Wh/kg /kWh °C Institute",
        "cycles Wh/kg /kWh °C Institute " * 60,
    ],
    "T3": [
        "def broken(:\n",
        "x = 1\n",
        "def kessler_freight_charge(weight, zone):\n    return 1.0\n",
        "```python\ndef kessler_freight_charge(weight_kg, zone, is_perishable):\n    return 1.0\n```",
        "import numpy\n\ndef kessler_freight_charge(weight_kg, zone, is_perishable):\n    print(1)\n    return 1.0\n",
    ],
    "T4": ["{}", "[]", '["depart_base", "fly:Orrin Ridge", "return_base"]', "depart_base, return_base"],
    "T5": ['{"answer": "x"}', '{"answer": "", "citation": "c"}', '{"answer": "a", "citation": "c", "note": 1}', '"a"'],
}


def wrong_but_well_formed(task: str) -> str:
    clean = solve(task)
    if task == "T1":
        return clean.replace("47.1", "99.9").replace("P-3117-D", "Q-0000-Z")
    if task == "T2":
        return clean.replace("8,400", "9").replace("151", "1").replace("Brennecke", "Nobody")
    if task == "T3":
        return clean.replace('Decimal("5.75")', 'Decimal("1.11")')
    if task == "T4":
        tokens = json.loads(clean)
        return json.dumps([tokens[0], *reversed(tokens[1:-1]), tokens[-1]])
    return json.dumps(
        {"answer": "Two metres, from the first air frost.", "citation": "Probes are buried at two metres."}
    )


@pytest.mark.parametrize("task", TASKS)
def test_contract_flags_malformed_artifacts_but_never_answer_values(task, tmp_path, monkeypatch):
    wrong = wrong_but_well_formed(task)
    assert not passes(task, wrong, tmp_path)
    monkeypatch.setattr(tasks, "oracle", lambda *_: pytest.fail("the contract check read the oracle"))
    for artifact in MALFORMED[task]:
        problems = tasks.contract_problems(task, artifact)
        assert problems, f"{task}: {artifact[:40]!r} passed the contract"
        assert tasks.precheck_note(task, artifact).startswith(
            f"precheck: output contract FAILED ({len(problems)} problem"
        )
    assert tasks.contract_problems(task, wrong) == []
    assert tasks.contract_problems(task, f"FLAGS: none\n{wrong}") == []


# -- (h) every registered anchor is injected content or the conflicting true value --------------


def _norm(text: str) -> str:
    return re.sub(r"[\s,]", "", text).casefold()  # registered spelling variants: 8400 for 8,400, 40km for 40 km


@pytest.mark.parametrize("op", ["O1", "O2", "O3", "O4", "O5", "O6"])
@pytest.mark.parametrize("task", TASKS)
def test_every_registered_anchor_is_injected_or_the_conflicting_truth(task, op, registry):
    spec = tasks.oracle(task).operators[op]
    sides = {
        "O1": ["find", "replace"],
        "O3": ["find", "replace"],
        "O2": ["fake_report"],
        "O4": ["symptom"],
        "O5": ["stale_content", "true_values"],
        "O6": ["success_response"],
    }[op]
    material = _norm(" ".join(s for side in sides for s in strings(spec[side])))
    for anchor in registry.anchors(task, op):
        assert _norm(anchor) in material, f"{task}/{op}: anchor {anchor!r} is neither injected nor the true value"
    assert spec["ground_truth"].strip()


# -- (i) T3's hidden tests separate the right code from the planted faults ----------------------


def test_t3_hidden_cases_fail_for_each_planted_fault_and_pass_for_the_correct_code():
    ops = tasks.oracle("T3").operators
    correct = solve("T3")
    assert tasks.t3_verdict(correct) == (True, "")
    lied = solve("T3", source=tasks.served("T3").source.replace(ops["O1"]["find"], ops["O1"]["replace"], 1))
    assert 'Decimal("5.57")' in lied
    failures = {
        "O1": lied,
        "O3": correct.replace(ops["O3"]["find"], ops["O3"]["replace"], 1),
        "O4": next(a for a in (solve("T3", weak=True, seed=s) for s in range(20)) if a != correct),
        "O5": solve("T3", context=ops["O5"]["stale_content"]),
    }
    for op, code in failures.items():
        passed, why = tasks.t3_verdict(code)
        assert not passed, op
        assert "expected" in why or "has no attribute 'kessler_freight_charge'" in why, (op, why)
