"""Live runs: every operator lands and is verified on both LangGraph configs; nothing leaves 127.0.0.1."""

import pytest

from adapters.runner import RunSpec, run
from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from sabot.matrix import Cell, Probe

OPERATORS = ("O1", "O2", "O3", "O4", "O5", "O6")


@pytest.mark.parametrize("config", ["default", "guardrail"])
@pytest.mark.parametrize("task", ["T1", "T2", "T3", "T4", "T5"])
def test_every_operator_lands_and_is_verified(registry, tmp_path, config, task):
    ruleset = load_ruleset(registry, "v0.2.0")
    baseline = run(RunSpec("t", 2, "langgraph", config, task, None, 11), registry, tmp_path).record
    assert baseline.error is None and baseline.injection_seq is None
    for op in OPERATORS:
        record = run(RunSpec("t", 2, "langgraph", config, task, op, 11), registry, tmp_path).record
        assert record.error is None, record.error
        assert record.injection_verified, (task, config, op)
        injected = [e for e in record.events if e.payload.get("injected")]
        assert len(injected) == 1 and injected[0].payload["operator"] == op  # exactly once per run
        assert record.injection_seq == injected[0].seq
        cell = Cell(op, Probe("langgraph", config, task, 11))
        verdict = score_cell(ruleset, cell, record, baseline)
        assert verdict.excluded != "INJECTION_UNVERIFIED"
        if op == "O4":
            assert "gpt-5.6-luna" in record.served_model_ids()  # verified from the model that served a call
        if op == "O6":
            assert not record.task_passed  # the write reported success and wrote nothing


def test_no_request_leaves_loopback(registry, tmp_path, monkeypatch, socket_addresses):
    monkeypatch.delenv("SABOT_MODEL_BASE_URL", raising=False)
    seen = socket_addresses
    for op in (None, "O1", "O4"):
        record = run(RunSpec("t", 2, "langgraph", "guardrail", "T2", op, 12), registry, tmp_path).record
        assert record.error is None
    assert seen, "the audit hook saw no connection at all"
    assert {host for host in seen if host not in ("127.0.0.1", "localhost", "::1")} == set()
