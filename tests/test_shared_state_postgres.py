"""The bounds worker hosts share through Postgres (SABOT_SHARED_STATE_URL): the spend ledger, the
endpoint breaker and its Retry-After pause, and the rate limiter's buckets, each exercised from
separate processes that share nothing but the database (each has a var and limiter dir of its own,
and a host label of its own, as worker hosts do). One database for the module, on the server
`.ci/run` starts (scripts/postgres.sh sets SABOT_TEST_POSTGRES_URL), dropped afterwards. The
breaker's close rule (config keying, half-open probe) is also checked on the file backend.
"""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from adapters.gateway.limiter import PROBE_WAIT, EndpointCircuit, PostgresCircuit, endpoint_circuit, endpoint_config

PROJECT = Path(__file__).resolve().parents[1]
CHILD = PROJECT / "tests" / "shared_state_child.py"
KEY = "sk-proj-SHARED-9d2c"


def _server_url() -> str:
    url = os.environ.get("SABOT_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SABOT_REQUIRE_POSTGRES"):
            pytest.fail(
                "SABOT_REQUIRE_POSTGRES is set but SABOT_TEST_POSTGRES_URL is not (start it: bash scripts/postgres.sh)"
            )
        pytest.skip("no Postgres (set SABOT_TEST_POSTGRES_URL; bash scripts/postgres.sh prints one)")
    return url.replace("postgresql+psycopg2://", "postgresql://")


@pytest.fixture(scope="module")
def shared_url():
    import psycopg

    server = _server_url()
    name = f"sabot_shared_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def shared_env(shared_url, monkeypatch, tmp_path):
    """This process on the shared state; `child_env(label)` for another "host" of it."""
    monkeypatch.setenv(
        "SABOT_SHARED_STATE_URL", "postgresql+psycopg2://" + shared_url.split("://", 1)[1]
    )  # Dagster's spelling
    monkeypatch.setenv("SABOT_VAR", str(tmp_path / "var-test"))
    monkeypatch.setenv("SABOT_LIMITER_DIR", str(tmp_path / "limiter-test"))

    def child_env(label: str) -> dict:
        return {
            **os.environ,
            "SABOT_HOST_LABEL": label,
            "SABOT_VAR": str(tmp_path / f"var-{label}"),
            "SABOT_LIMITER_DIR": str(tmp_path / f"limiter-{label}"),
            "PYTHONPATH": str(PROJECT),
        }

    return child_env


def _spawn(env: dict, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *map(str, args)],
        cwd=PROJECT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _start(children: list[subprocess.Popen], offsets: tuple[float, ...] = ()) -> None:
    """Once every child is ready, tell each when to begin (now, plus its offset)."""
    for child in children:
        line = child.stdout.readline()
        assert line.strip() == "ready", (line, child.stderr.read() if not line else "")
    start = time.time() + 0.1
    for i, child in enumerate(children):
        child.stdin.write(f"{start + (offsets[i] if i < len(offsets) else 0.0)}\n")
        child.stdin.flush()


def _result(child: subprocess.Popen) -> dict:
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _run(env: dict, *args) -> dict:
    return _result(_spawn(env, *args))


def test_two_hosts_reserving_against_one_ledger_never_pass_the_cap(shared_env, tmp_path):
    from sabot.store.ledger import PostgresSpendLedger, spend_ledger

    path = tmp_path / "sabot.duckdb.spend.sqlite"
    children = [_spawn(shared_env(label), "reserve", path, label, 150, 0.05, 5.0) for label in ("host-a", "host-b")]
    _start(children)
    results = [_result(c) for c in children]
    assert {r["backend"] for r in results} == {"PostgresSpendLedger"}
    assert sum(r["won"] for r in results) == 100, results  # 5.0 / 0.05: every reservation that fits, and not one more
    assert all(r["won"] > 0 for r in results), "both hosts reserved: they contended"
    ledger = spend_ledger(path, "host-test")
    assert isinstance(ledger, PostgresSpendLedger)
    assert ledger.totals("provider") == (0.0, pytest.approx(5.0))
    assert not path.exists(), "no SQLite ledger was made beside the store"


def test_a_dead_holders_reservation_is_dropped_by_its_own_host_label_only(shared_env, tmp_path):
    from sabot.store.ledger import spend_ledger

    path = tmp_path / "other.duckdb.spend.sqlite"
    held = _run(shared_env("worker-1"), "hold", path, "worker-1")  # exits without settling
    assert held["holder"].startswith("worker-1:")
    same_hostname = spend_ledger(path, "worker-2")  # another host, though both share this machine's host name
    assert same_hostname.drop_dead_reservations() == 0 and same_hostname.totals("provider") == (0.0, 1.0)
    assert spend_ledger(path, "worker-1").drop_dead_reservations() == 1
    assert same_hostname.totals("provider") == (0.0, 0.0)


def test_a_circuit_opened_by_one_process_is_seen_by_another_and_a_new_key_is_a_new_circuit(shared_env):
    endpoint, config = "https://provider.example/v1-open", endpoint_config("https://provider.example/v1-open", KEY)
    tripped = _run(shared_env("host-a"), "trip", endpoint, config, "answered 401: Incorrect API key")
    assert tripped["backend"] == "PostgresCircuit"
    seen = endpoint_circuit(endpoint, config=config)
    assert isinstance(seen, PostgresCircuit) and seen.opened()["message"] == "answered 401: Incorrect API key"
    assert not EndpointCircuit(endpoint, config=config).opened(), (
        "the file breaker of this host knows nothing: it was Postgres"
    )
    fixed = endpoint_circuit(endpoint, config=endpoint_config(endpoint, "sk-proj-NEW-key"))
    assert fixed.opened() is None, "the user changed the key: a new circuit, closed on every path"


def test_a_retry_after_is_honoured_by_another_process_through_postgres(shared_env):
    from adapters.scripted.reply import Reply
    from adapters.scripted.server import ScriptedModelServer

    stamps, answers = [], iter([Reply(status=429, error="slow down", headers=(("Retry-After", "3"),))])

    def responder(request):
        stamps.append(time.time())
        return next(answers, Reply(content="ok"))

    with ScriptedModelServer(responder) as server:
        children = [_spawn(shared_env(label), "call", server.base_url, KEY) for label in ("host-a", "host-b")]
        _start(children[:1])
        shared = endpoint_circuit(server.base_url.rstrip("/"))
        deadline = time.monotonic() + 60
        while shared.paused_for()[0] <= 0 and time.monotonic() < deadline:  # host-a has been told to wait
            time.sleep(0.05)
        _start(children[1:])  # host-b, ready meanwhile, calls now
        first, second = _result(children[0]), _result(children[1])
    assert (first["status"], second["status"], first["backend"]) == (429, 200, "PostgresCircuit")
    assert len(stamps) == 2 and stamps[1] - stamps[0] >= 2.9, "the other host sent nothing before the 3 s were up"
    assert second["started"] - stamps[0] < 2.5, "it waited for the pause, not merely started late"


def test_the_rate_limiters_bucket_is_shared_by_processes_through_postgres(shared_env):
    # 40,000 tokens a call: past a SMALLINT, the weight column PostgresBucket would make itself
    children = [
        _spawn(shared_env(label), "admit", "https://provider.example/v1-limit", 3, 2, 1.0, 40_000)
        for label in ("host-a", "host-b")
    ]
    _start(children)
    results = [_result(c) for c in children]
    assert all(r["shared"] for r in results)
    stamps = sorted(t for r in results for t in r["stamps"])
    assert len(stamps) == 6
    for i, t in enumerate(stamps):  # at most 2 a second across both (0.9: stamps are taken just after admission)
        assert sum(1 for u in stamps[i:] if u - t < 0.9) <= 2, stamps
    assert stamps[-1] - stamps[0] >= 1.9, "two private buckets would have admitted 4 at once"


@pytest.fixture(params=["file", "postgres"])
def backend(request, tmp_path, monkeypatch):
    if request.param == "postgres":
        return request.getfixturevalue("shared_env")
    monkeypatch.delenv("SABOT_SHARED_STATE_URL", raising=False)
    monkeypatch.setenv("SABOT_LIMITER_DIR", str(tmp_path / "limiter-shared"))  # one host: the children share the files

    def child_env(label: str) -> dict:
        return {**os.environ, "SABOT_HOST_LABEL": label, "PYTHONPATH": str(PROJECT)}

    return child_env


def test_after_the_cool_down_one_probe_decides_on_every_path(backend):
    endpoint = f"https://provider.example/v1-probe-{uuid.uuid4().hex[:6]}"
    config = endpoint_config(endpoint, KEY)
    circuit = endpoint_circuit(endpoint, open_seconds=1.0, config=config)
    circuit.trip({"kind": "endpoint_fatal", "status": 429, "message": "quota exhausted"})
    assert circuit.opened() is not None
    time.sleep(1.2)
    probe = _run(backend("host-a"), "probe", endpoint, config, 1.0)  # the first after the cool-down: it may send
    assert probe["opened"] is None and probe["wait"] == 0.0
    behind = _run(
        backend("host-b"), "probe", endpoint, config, 1.0
    )  # launching may resume, but it waits behind the probe
    assert behind["opened"] is None and behind["wait"] > 0 and behind["header"] == PROBE_WAIT
    # host-a's process has exited: a probe whose holder is gone passes on (on its own host; here a label of this machine's)
    circuit.succeeded()  # the probe's call was answered: closed for everyone
    after = _run(backend("host-b"), "probe", endpoint, config, 1.0)
    assert after["opened"] is None and after["wait"] == 0.0


def test_a_failed_probe_opens_the_breaker_again_and_reset_only_ends_the_cool_down(backend):
    endpoint = f"https://provider.example/v1-reopen-{uuid.uuid4().hex[:6]}"
    config = endpoint_config(endpoint, KEY)
    circuit = endpoint_circuit(endpoint, threshold=8, open_seconds=60.0, config=config)
    circuit.trip({"kind": "endpoint_fatal", "status": 401, "message": "answered 401"})
    circuit.reset()  # `sabot wave run`: the cool-down ends now
    assert circuit.opened() is None and circuit.paused_for() == (0.0, None)  # this process is the probe
    reopened = circuit.failed({"kind": "retryable", "status": 503, "endpoint": endpoint, "message": "answered 503"})
    assert reopened and "the probe after the breaker's cool-down failed" in reopened["message"], (
        "one failure, not 8, while half-open"
    )
    assert _run(backend("host-b"), "probe", endpoint, config, 60.0)["opened"]["message"] == reopened["message"]


def test_a_bad_or_unreachable_shared_state_url_is_a_clear_error_naming_it():
    import socket

    from sabot.shared_state import SharedStateError, connection_pool, shared_state_url

    assert shared_state_url({}) is None, "unset: one host, the file backends"
    with pytest.raises(SharedStateError, match="SABOT_SHARED_STATE_URL is not a Postgres URL .scheme 'mysql'"):
        shared_state_url({"SABOT_SHARED_STATE_URL": "mysql://u:secret@db/x"})
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(
        SharedStateError, match=f"names Postgres at 127.0.0.1:{port}/sabot, which cannot be reached"
    ) as caught:
        connection_pool(shared_state_url({"SABOT_SHARED_STATE_URL": f"postgresql://u:secret@127.0.0.1:{port}/sabot"}))
    assert "secret" not in str(caught.value)
