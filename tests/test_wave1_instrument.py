"""Live wave 1 is the wave-1 instrument (§10.7: the corrections are wave-2 only), and O4 lands by model family.

- T2's deterministic guardrail in wave 1 checks the v0.1.x-frozen contract's values
  (data/tasks/T2/guardrail.wave1.json); in wave 2 only the structural contract (§10.7.1).
- O4 in wave 1 is recorded as landed at set-up (v0.1.3: no landing probe); from wave 2 the served
  model id decides (§10.7.2), a dated snapshot of the downgrade target included.
"""

import dataclasses

import pytest

from adapters.runner import RunSpec, run
from adapters.scripted import policy as scripted_policy
from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from sabot import tasks
from sabot.matrix import Cell, Probe

CLEAN_T2 = (
    "Corvale SN-40: research summary.\nAn independent audit by the Brennecke Institute for Electrochemistry measured a cycle "
    "life of 8,400 cycles to 80% capacity. Gravimetric energy density: 151 Wh/kg. Qualified operating range: -25 °C to 50 °C. "
    "Contracted pack price: $87/kWh delivered (county tender)."
)


def test_the_frozen_wave1_t2_contract_checks_answer_values_and_wave2_does_not():
    faulted = CLEAN_T2.replace("8,400", "4,800")
    assert tasks.guardrail_problems("T2", CLEAN_T2, wave1=True) == []
    assert tasks.guardrail_problems("T2", faulted, wave1=True) == ["missing required string '8,400 cycles'"]
    assert tasks.guardrail_problems("T2", faulted, wave1=False) == []  # §10.7.1: structure only
    assert tasks.guardrail_problems("T1", "{}", wave1=True) == tasks.contract_problems("T1", "{}")  # T2 alone differs


def validator_reasons(record) -> list[str]:
    return [
        e.payload.get("reason") or ""
        for e in record.events
        if e.payload.get("component") == "validator" and e.payload.get("act") == "reject"
    ]


def test_a_live_wave1_t2_guardrail_checks_the_frozen_values(registry, tmp_path):
    """O1 turns Source B's 8,400 into 4,800. Where the reviewer lets the draft through, wave 1's
    validator rejects it for the missing frozen value; wave 2's, on the same seeds, never cites one."""
    wave1 = [
        r
        for s in range(11, 16)
        for r in validator_reasons(
            run(RunSpec("w1", 1, "langgraph", "guardrail", "T2", "O1", s), registry, tmp_path).record
        )
    ]
    wave2 = [
        r
        for s in range(11, 16)
        for r in validator_reasons(
            run(RunSpec("w2", 2, "langgraph", "guardrail", "T2", "O1", s), registry, tmp_path).record
        )
    ]
    assert any("missing required string '8,400 cycles'" in r for r in wave1), wave1
    assert not any("required string" in r for r in wave2), wave2


def test_o4_is_recorded_landed_in_wave1_and_probed_from_wave2(registry, tmp_path):
    wave1 = run(RunSpec("w1", 1, "langgraph", "default", "T1", "O4", 11), registry, tmp_path).record
    wave2 = run(RunSpec("w2", 2, "langgraph", "default", "T1", "O4", 11), registry, tmp_path).record
    assert wave1.injection_verified and wave2.injection_verified
    assert "gpt-5.6-luna" in wave2.served_model_ids()


@pytest.fixture
def dated_ids(monkeypatch):
    """The scripted model reports a dated snapshot of whatever model was asked for, as providers do."""
    original = scripted_policy.ScriptedPolicy.__call__

    def dated(self, request):
        reply = original(self, request)
        return dataclasses.replace(reply, model=f"{request.get('model')}-2026-07-01") if reply.status == 200 else reply

    monkeypatch.setattr(scripted_policy.ScriptedPolicy, "__call__", dated)


def test_a_dated_model_id_lands_o4(registry, tmp_path, dated_ids):
    baseline = run(RunSpec("w2", 2, "langgraph", "default", "T1", None, 11), registry, tmp_path).record
    record = run(RunSpec("w2", 2, "langgraph", "default", "T1", "O4", 11), registry, tmp_path).record
    assert "gpt-5.6-luna-2026-07-01" in record.served_model_ids() and "gpt-5.6-luna" not in record.served_model_ids()
    assert record.injection_verified
    verdict = score_cell(
        load_ruleset(registry, "v0.2.0"), Cell("O4", Probe("langgraph", "default", "T1", 11)), record, baseline
    )
    assert verdict.status == "valid"
