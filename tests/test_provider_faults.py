"""Live waves against a 127.0.0.1 provider that fails the way real ones do: each failure is classified
by the registered taxonomy, bounded by the endpoint's host-wide breaker, and leaves the store holding
what a paying team would expect (good runs kept, missing cells resumable, no secret at rest).

One store serves the module: a clean scripted run of T1 first (the good runs every later wave must
keep), then one provider failure per test. The call policy is shortened (breaker after 3 failed
attempts, a 1.5 s first-byte timeout, a 5 s Retry-After ceiling) so each test takes seconds.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.store.db import connect
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import Block, WaveRunner
from sabot_assets.wave_jobs import Slice, run_wave
from tests.fault_provider import FaultProvider

PROJECT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-LEAKCHECK-7f3a9c2e1b"
QUICK_POLICY = {
    "retry": {
        "max_attempts": 3,
        "initial_backoff_seconds": 0.05,
        "max_backoff_seconds": 0.2,
        "jitter_seconds": 0.05,
        "max_retry_after_seconds": 5,
    },
    "call_timeout_seconds": 5,
    "connect_timeout_seconds": 1,
    "first_byte_timeout_seconds": 1.5,
    "breaker": {"consecutive_failures": 3, "open_seconds": 600},
}
T1, T2 = Slice(("langgraph",), ("default",), ("T1",)), Slice(("langgraph",), ("default",), ("T2",))
SLOTS = 7  # one baseline and six fault runs


class Store:
    def __init__(self, registry, tmp: Path, instance):
        self.registry, self.tmp, self.instance = registry, tmp, instance
        self.path = tmp / "sabot.duckdb"
        self.defs = build_definitions(registry, DuckDBResource(database=str(self.path)))

    def wave(self, selection: Slice):
        """The whole wave command: runs, verdicts, board."""
        started = time.monotonic()
        result = run_wave(self.registry, self.defs, self.instance, "demo", selection=selection)
        return result.tally, time.monotonic() - started

    def runs(self, selection: Slice):
        """Only the run assets of the slice (baselines, then fault runs): what a stop is about, seconds cheaper."""
        runner = WaveRunner(self.defs, self.registry.wave("demo"), self.instance)
        [framework], [config], [task] = selection.frameworks, selection.configs, selection.tasks
        started = time.monotonic()
        runner.runs(Block(framework, config, task, task))
        return runner.tally, time.monotonic() - started

    def query(self, sql: str, *args):
        with connect(self.path, read_only=True) as con:
            return con.execute(sql, list(args)).fetchall()

    def scored(self, task: str):
        return self.query(
            "SELECT operator, probe, attempt, source_sha256 FROM runs WHERE wave = 'demo' AND status = 'present' "
            "AND probe LIKE ? ORDER BY 1, 2",
            f"langgraph.default.{task}.%",
        )

    def outcomes(self, task: str):
        return dict(
            self.query(
                "SELECT outcome, count(*) FROM attempts WHERE probe LIKE ? GROUP BY 1", f"langgraph.default.{task}.%"
            )
        )


@pytest.fixture(scope="module")
def store(registry, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    (tmp / "dagster").mkdir()
    policy = tmp / "quick_call_policy.json"
    policy.write_text(json.dumps(QUICK_POLICY))
    with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
        s = Store(registry, tmp, instance)
        tally, _ = s.runs(T1)  # the scripted model: the good runs every failure below must keep
        assert (tally.ran, tally.run_errors, tally.stopped) == (SLOTS, {}, None)
        s.policy = policy
        yield s


@pytest.fixture
def provider_env(store, monkeypatch, tmp_path):
    def point_at(provider: FaultProvider):
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", provider.base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", KEY)
        monkeypatch.setenv("SABOT_CALL_POLICY", str(store.policy))

    return point_at


def key_occurrences(*roots: Path) -> list[str]:
    hits = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and KEY.encode() in path.read_bytes():
                hits.append(str(path))
    return hits


@pytest.mark.parametrize(
    "mode,reason", [("dead", "connection failed"), ("hang", "timed out after 1.5 s waiting for the first byte")]
)
def test_a_dead_or_hanging_endpoint_stops_the_wave_after_k_failures_keeping_the_good_runs(
    store, provider_env, mode, reason
):
    good, before = store.scored("T1"), store.outcomes("T1")
    with FaultProvider(mode) as provider:
        provider_env(provider)
        tally, seconds = store.runs(T1)
        calls = provider.calls
    assert tally.stopped and reason in tally.stopped and "3 failed attempts in a row" in tally.stopped, tally.stopped
    assert (
        tally.run_errors == {} and tally.ran == 0 and tally.not_launched == SLOTS
    )  # every cell missing, none RUN_ERROR
    assert store.scored("T1") == good  # the stored good runs are kept, untouched
    after = store.outcomes("T1")  # one more: the run the breaker cut off, kept as evidence
    assert after == {**before, "stopped": before.get("stopped", 0) + 1}
    if mode == "hang":
        assert calls == 3, "three connections, each cut at the first-byte timeout, then no more"
    assert seconds < 60, f"stopped in {seconds:.1f} s"


def test_a_refused_key_stops_the_wave_at_once_naming_status_and_endpoint(store, provider_env):
    with FaultProvider("401", key=KEY) as provider:
        provider_env(provider)
        tally, _ = store.runs(T2)
        calls = provider.calls
    assert calls == 1, "the first 401 stopped every further call"
    assert tally.stopped.startswith(
        f"provider {provider.base_url} (POST {provider.base_url}/chat/completions) answered 401: Incorrect API key"
    )
    assert KEY not in tally.stopped and "[redacted]" in tally.stopped
    assert tally.run_errors == {} and tally.not_launched == SLOTS
    assert store.scored("T2") == [] and store.outcomes("T2") == {"stopped": 1}
    assert key_occurrences(store.tmp) == []


def test_a_quota_429_is_endpoint_fatal_not_retried(store, provider_env):
    with FaultProvider("quota") as provider:
        provider_env(provider)
        tally, _ = store.runs(T2)
        calls = provider.calls
    assert calls == 1 and "answered 429: You exceeded your current quota" in tally.stopped
    assert tally.run_errors == {} and store.scored("T2") == []


def test_a_long_retry_after_pauses_the_endpoint_for_every_caller_and_stops_naming_it(store, provider_env):
    from adapters.gateway.limiter import endpoint_circuit

    with FaultProvider("retry-after", retry_after=120) as provider:
        provider_env(provider)
        tally, _ = store.runs(T2)
        assert provider.calls == 1 and "Retry-After: 120" in tally.stopped and "ceiling of 5 s" in tally.stopped
        circuit = endpoint_circuit(provider.base_url.rstrip("/"))  # the host's file, or the deployment's Postgres
        wait, header = circuit.paused_for()
        assert 100 < wait <= 120 and header == "120"  # learnt by the host, for every process
        circuit.reset()  # what a new `sabot wave run` does: the open breaker closes, the pause holds
        tally, _ = store.runs(T2)
        assert provider.calls == 1, "no request before the 120 s are up"
        assert "Retry-After: 120" in tally.stopped
    assert tally.run_errors == {} and store.scored("T2") == []


def test_a_retry_after_under_the_ceiling_is_waited_out_by_another_caller_too(tmp_path):
    from adapters.gateway import CallPolicy, ModelGateway, Upstream
    from adapters.scripted.reply import Reply
    from adapters.scripted.server import ScriptedModelServer

    import openai

    stamps, answers = [], iter([Reply(status=429, error="slow", headers=(("Retry-After", "2"),))])

    def responder(request):
        stamps.append(time.monotonic())
        return next(answers, Reply(content="ok"))

    policy = CallPolicy.from_doc(
        {
            **QUICK_POLICY,
            "run_wall_limit_seconds": 60,
            "limits": {},
            "retry": {**QUICK_POLICY["retry"], "max_attempts": 1, "max_total_seconds": 20, "retry_on_status": [429]},
        }
    )
    with ScriptedModelServer(responder) as server:
        upstream = Upstream(server.base_url, KEY, "provider test", scripted=False)
        with ModelGateway(upstream, policy, "first") as first, ModelGateway(upstream, policy, "second") as second:
            with pytest.raises(openai.APIStatusError):
                openai.OpenAI(base_url=first.base_url, api_key="x", max_retries=0).chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "a"}]
                )
            openai.OpenAI(base_url=second.base_url, api_key="x", max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "b"}]
            )
    assert len(stamps) == 2 and stamps[1] - stamps[0] >= 1.9, (
        "the other caller waited out the Retry-After before sending"
    )


def test_a_missing_downgrade_model_fails_only_the_o4_cells_and_spend_is_what_was_answered(
    store, provider_env, registry
):
    downgrade = registry.doc("standard/models.v0.1.1.json")["o4_downgrade_model"]
    with FaultProvider("404-model", missing_model=downgrade) as provider:
        provider_env(provider)
        tally, _ = store.wave(T2)
        answered = provider.answered
    assert list(tally.run_errors) == ["O4|langgraph.default.T2.s11"], tally.run_errors
    [error] = tally.run_errors.values()
    assert f"answered 404 for model {downgrade}: The model `{downgrade}` does not exist" in error
    assert tally.stopped is None and tally.ran == SLOTS  # the RUN_ERROR run included
    verdicts = dict(
        store.query(
            "SELECT operator, status FROM cell_verdicts WHERE wave = 'demo' AND ruleset = 'v0.2.0' AND probe = 'langgraph.default.T2.s11'"
        )
    )
    assert verdicts.pop("O4") == "excluded" and set(verdicts.values()) == {"valid"} and len(verdicts) == 5
    [(paid, refused)] = store.query(
        "SELECT count(*) FILTER (status = 200), count(*) FILTER (status <> 200 AND cost_usd > 0) "
        "FROM model_calls WHERE probe = 'langgraph.default.T2.s11' AND endpoint LIKE 'provider %'"
    )
    assert paid == answered > 0 and refused == 0


def test_an_error_body_echoing_the_key_leaves_no_trace_of_it(store, provider_env):
    with FaultProvider("400-echo", key=KEY) as provider:
        provider_env(provider)
        tally, _ = store.runs(Slice(("langgraph",), ("guardrail",), ("T1",)))
    [(key, error)] = tally.run_errors.items()  # the first call (the baseline's) was refused: that cell alone
    assert key == "langgraph.guardrail.T1.s11" and "answered 400" in error and "[redacted]" in error
    assert key_occurrences(store.tmp) == []


def test_without_the_cli_a_new_key_finds_a_closed_breaker(store, provider_env, monkeypatch):
    """The asset step as a UI backfill or the daemon runs it (no `sabot wave run`, so no reset): the
    breaker a refused key opened holds for that key, and a run with the fixed key finds a new circuit
    at once. (The cool-down and its half-open probe: tests/test_shared_state_postgres.py, both backends.)"""
    with FaultProvider("401", key=KEY) as provider:
        provider_env(provider)
        tally, _ = store.runs(T1)
        assert provider.calls == 1 and "answered 401" in tally.stopped
        provider.mode = "404-model"  # the provider would answer now, but the key is the one it refused
        tally, _ = store.runs(T1)
        assert provider.calls == 1 and tally.ran == 0, "the breaker holds for the refused key: nothing sent"
        monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-proj-FIXED-key-4e1d")
        tally, _ = store.runs(T1)
    assert tally.stopped is None and tally.run_errors == {} and tally.ran == SLOTS
    assert provider.answered == provider.calls - 1 > 0


def test_the_cli_stops_with_one_paragraph_saying_what_failed_what_is_missing_and_how_to_resume(tmp_path):
    policy = tmp_path / "quick.json"
    policy.write_text(json.dumps(QUICK_POLICY))
    env = {k: v for k, v in os.environ.items() if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")}
    args = ["wave", "run", "demo", "--framework", "langgraph", "--config", "default", "--task", "T1"]
    with FaultProvider("401", key=KEY) as provider:
        env.update(
            SABOT_VAR=str(tmp_path / "var"),
            SABOT_MODEL_BASE_URL=provider.base_url,
            SABOT_MODEL_API_KEY=KEY,
            SABOT_CALL_POLICY=str(policy),
        )
        done = subprocess.run(
            [str(PROJECT / ".venv/bin/sabot"), *args], env=env, capture_output=True, text=True, timeout=600
        )
        calls = provider.calls
    assert done.returncode == 1, done.stderr[-2000:]
    [paragraph] = [line for line in done.stderr.splitlines() if "the wave stopped" in line]
    assert "answered 401: Incorrect API key provided: [redacted]" in paragraph and provider.base_url in paragraph
    assert f"{SLOTS} run(s) of this selection are missing" in paragraph and "none is RUN_ERROR" in paragraph
    assert f"`sabot {' '.join(args)}` resumes them" in paragraph
    assert calls == 1 and KEY not in done.stdout + done.stderr and key_occurrences(tmp_path / "var") == []


def test_a_provider_billing_past_the_registered_bounds_never_costs_a_run_more_than_its_reservation(
    store, provider_env, registry
):
    """Every call is billed at 600 times the scripted model's usage (a prompt ~30x the per-call token bound;
    a run's first call about half its worst case, so runs of a few calls meet the bound whatever their faults do):
    a call that could take a run past its registered worst case (what a pilot run reserves) is not sent;
    that run is RUN_ERROR naming the bound, its paid calls stored; no run's stored spend passes the reservation."""
    from sabot.budget import Margin
    from sabot.pricing import PriceTable

    reservation = Margin.from_registry(registry).pilot_worst_case(PriceTable.from_registry(registry))
    with FaultProvider("large-usage", usage_scale=600) as provider:
        provider_env(provider)
        tally, _ = store.runs(Slice(("langgraph",), ("guardrail",), ("T2",)))
        answered = provider.answered
    assert tally.run_errors and tally.stopped is None
    for error in tally.run_errors.values():
        assert (
            "call not sent: one more call" in error
            and "would pass the run's registered bound of $3.00 metered" in error
        ), error
        assert "spend_margin.v1.json" in error
    runs = store.query(
        "SELECT operator, probe, SUM(cost_usd), count(*) FILTER (status = 200), count(*) FILTER (status = 403 AND cost_usd IS NULL) "
        "FROM model_calls WHERE probe LIKE 'langgraph.guardrail.T2.%' AND endpoint LIKE 'provider %' GROUP BY 1, 2"
    )
    assert len(runs) == SLOTS
    assert 0 < max(spent for _, _, spent, _, _ in runs) <= reservation
    assert sum(paid for _, _, _, paid, _ in runs) == answered  # every paid call stored, the RUN_ERROR runs' included
    cut = {f"{operator}|{probe}" if operator else probe for operator, probe, _, _, unsent in runs if unsent}
    assert cut == set(
        tally.run_errors
    )  # exactly the cut-off runs hold an unsent call; the rest finished within the bound
