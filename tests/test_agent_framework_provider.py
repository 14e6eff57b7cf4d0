"""The Agent Framework rows on the provider path: against a 127.0.0.1 OpenAI-compatible provider their
calls are metered and stored as spend, O4 lands (also when the provider reports a dated snapshot of
the downgrade target), and a provider refusing the downgrade model fails only the O4 cells."""

import dataclasses
import json

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.server import ScriptedModelServer
from sabot.store.db import connect
from sabot.trace import parse_runresult
from sabot_assets.definitions import build_definitions
from sabot_assets.wave_jobs import Slice, run_wave
from tests.fault_provider import FaultProvider

KEY = "sk-proj-AGENTFW-0c1d2e3f"
QUICK_POLICY = {
    "retry": {
        "max_attempts": 2,
        "initial_backoff_seconds": 0.05,
        "max_backoff_seconds": 0.2,
        "jitter_seconds": 0.05,
        "max_retry_after_seconds": 5,
    },
    "call_timeout_seconds": 20,
    "connect_timeout_seconds": 2,
    "first_byte_timeout_seconds": 10,
    "breaker": {"consecutive_failures": 5, "open_seconds": 600},
}


class Store:
    def __init__(self, registry, tmp, instance):
        self.registry, self.instance, self.path = registry, instance, tmp / "sabot.duckdb"
        self.defs = build_definitions(registry, DuckDBResource(database=str(self.path)))

    def wave(self, selection: Slice):
        return run_wave(self.registry, self.defs, self.instance, "demo", selection=selection).tally

    def query(self, sql: str, *args):
        with connect(self.path, read_only=True) as con:
            return con.execute(sql, list(args)).fetchall()


@pytest.fixture(scope="module")
def store(registry, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agent_framework_provider")
    (tmp / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
        s = Store(registry, tmp, instance)
        s.policy = tmp / "quick_call_policy.json"
        s.policy.write_text(json.dumps(QUICK_POLICY))
        yield s


@pytest.fixture
def provider_env(store, monkeypatch):
    def point_at(base_url: str):
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", KEY)
        monkeypatch.setenv("SABOT_CALL_POLICY", str(store.policy))

    return point_at


class DatedSnapshots:
    """A provider that reports every served model as a dated snapshot of the alias asked for."""

    def __init__(self, weak_model: str):
        self.policy = ScriptedPolicy("dated-provider", weak_model=weak_model)

    def __call__(self, request):
        return dataclasses.replace(self.policy(request), model=f"{request['model']}-2026-07-01")


def o4_verdicts(store, config: str, task: str):
    return dict(
        store.query(
            "SELECT operator, status FROM cell_verdicts WHERE wave = 'demo' AND ruleset = 'v0.2.0' AND probe = ?",
            f"agent_framework.{config}.{task}.s11",
        )
    )


def test_both_rows_against_a_provider_count_spend_and_land_o4_from_dated_ids(store, provider_env, registry):
    downgrade = registry.doc("standard/models.v0.1.1.json")["o4_downgrade_model"]
    responder = DatedSnapshots(downgrade)
    with ScriptedModelServer(responder) as provider:
        base_url = provider.base_url
        provider_env(base_url)
        tally = store.wave(Slice(("agent_framework",), None, ("T1",), ("O4",)))
        answered = len(provider.exchanges)
    assert (tally.run_errors, tally.stopped) == ({}, None) and tally.ran == 4  # two baselines, two O4 runs
    for config in ("default", "guardrail"):
        assert o4_verdicts(store, config, "T1") == {"O4": "valid"}  # landed: the dated downgrade id served a call
        [(served,)] = store.query(
            "SELECT record FROM runs WHERE wave = 'demo' AND operator = 'O4' AND probe = ?",
            f"agent_framework.{config}.T1.s11",
        )
        assert f"{downgrade}-2026-07-01" in parse_runresult(json.loads(served), "stored O4 run").served_model_ids()
    [(paid, spent, endpoints)] = store.query(
        "SELECT count(*) FILTER (status = 200), SUM(cost_usd), list(DISTINCT endpoint) FROM model_calls "
        "WHERE wave = 'demo' AND probe LIKE 'agent_framework.%'"
    )
    assert paid == answered > 0 and spent > 0 and endpoints == [f"provider {base_url}"]


def test_a_provider_refusing_the_downgrade_model_fails_only_the_o4_cells(store, provider_env, registry):
    downgrade = registry.doc("standard/models.v0.1.1.json")["o4_downgrade_model"]
    with FaultProvider("404-model", missing_model=downgrade) as provider:
        provider_env(provider.base_url)
        tally = store.wave(Slice(("agent_framework",), ("guardrail",), ("T2",), ("O1", "O4")))
    assert list(tally.run_errors) == ["O4|agent_framework.guardrail.T2.s11"], tally.run_errors
    assert f"answered 404 for model {downgrade}" in tally.run_errors["O4|agent_framework.guardrail.T2.s11"]
    assert o4_verdicts(store, "guardrail", "T2") == {"O1": "valid", "O4": "excluded"}
