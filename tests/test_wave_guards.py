"""What a team paying for a wave relies on: one cap across concurrent commands, a pilot refused when
its budget cannot pay one run's worst case, replays that are never provider work, claimed cells run
once, and no process outliving its killed command.

The provider is a stand-in on 127.0.0.1 (the scripted model's responder behind a plain
OpenAI-compatible server), reporting usage at the registered per-call bounds where the cap is tested.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

import adapters.scripted.wire as scripted_wire
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.server import ScriptedModelServer
from sabot.store.db import connect
from sabot.store.ledger import ledger_path, spend_ledger

PROJECT = Path(__file__).resolve().parents[1]
SLICE = [
    "demo",
    "--framework",
    "langgraph",
    "--config",
    "default",
    "--operator",
    "O1",
]  # per task: a baseline and one fault run
CLEAN_ENV = ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE")


@pytest.fixture
def provider():
    with ScriptedModelServer(ScriptedPolicy("stand-in provider")) as server:
        yield server


@pytest.fixture
def quick_policy(tmp_path) -> Path:
    path = tmp_path / "quick_call_policy.json"
    path.write_text(json.dumps({"retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "jitter_seconds": 0.05}}))
    return path


def _env(var: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    return {**env, "SABOT_VAR": str(var), **extra}


def _sabot(var: Path, *args, **extra) -> tuple[subprocess.Popen, Path]:
    """A command in the background, its output to files: a full pipe would stall it mid-wave."""
    logs = Path(tempfile.mkdtemp(dir=var, prefix="out-"))
    with open(logs / "out", "w") as out, open(logs / "err", "w") as err:
        process = subprocess.Popen(
            [str(PROJECT / ".venv/bin/sabot"), "wave", "run", *args],
            env=_env(var, **extra),
            stdout=out,
            stderr=err,
            text=True,
        )
    return process, logs


def _finish(started: tuple[subprocess.Popen, Path]) -> tuple[int, str, str]:
    process, logs = started
    process.wait(timeout=600)
    return process.returncode, (logs / "out").read_text(), (logs / "err").read_text()


def _attempts(var: Path) -> list[Path]:
    return sorted((var / "runroot").glob("demo/*/*/*/*/*/attempt-*"))  # (command output lives in var/out-*)


def _at_bounds(monkeypatch, registry) -> None:
    """The stand-in reports every call at the registered per-call token bounds: large, still bounded."""
    bounds = registry.doc("standard/spend_margin.v1.json")["pilot_run_bounds"]
    prompt, completion = bounds["max_prompt_tokens_per_call"], bounds["max_completion_tokens_per_call"]
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    monkeypatch.setattr(scripted_wire, "usage_for", lambda request, reply: dict(usage))


def test_a_pilot_budget_below_one_runs_worst_case_is_refused_before_any_call(tmp_path, provider, quick_policy):
    code, out, err = _finish(
        _sabot(
            tmp_path,
            *SLICE,
            "--task",
            "T1",
            "--budget",
            "1",
            SABOT_MODEL_BASE_URL=provider.base_url,
            SABOT_MODEL_API_KEY="sk-test",
            SABOT_CALL_POLICY=str(quick_policy),
        )
    )
    assert code == 1, err[-2000:]
    assert "a pilot run of langgraph" in err and "can cost up to $6.00 margined under the registered bounds" in err
    assert "no run is launched" in err and "Traceback" not in err
    assert provider.exchanges == [] and _attempts(tmp_path) == []


def test_two_concurrent_commands_never_pass_the_cap_between_them(
    tmp_path, provider, quick_policy, registry, monkeypatch
):
    """Each command alone could launch both its runs under a $6.50 budget (a pilot run reserves its
    $6 worst case; settled, it costs about $0.30 margined). Sharing the store's ledger, the two stop
    where the next reservation would pass the ceiling between them."""
    import re

    _at_bounds(monkeypatch, registry)
    env = dict(
        SABOT_MODEL_BASE_URL=provider.base_url, SABOT_MODEL_API_KEY="sk-test", SABOT_CALL_POLICY=str(quick_policy)
    )
    commands = [_sabot(tmp_path, *SLICE, "--task", task, "--budget", "6.5", **env) for task in ("T1", "T2")]
    results = [_finish(c) for c in commands]
    for code, _out, err in results:
        assert code in (0, 1) and "Traceback" not in err, err[-3000:]
    ceilings = [float(m) for _, out, _ in results for m in re.findall(r"stops launching at \$([0-9.]+)", out)]
    assert len(ceilings) == 2 and min(ceilings) >= 6.5  # each: its budget on top of what was spent when it started
    with connect(tmp_path / "sabot.duckdb", read_only=True) as con:
        metered = con.execute(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM model_calls WHERE endpoint LIKE 'provider%'"
        ).fetchone()[0]
        stored_runs = con.execute("SELECT count(*) FROM attempts WHERE wave = 'demo'").fetchone()[0]
    margin = registry.doc("standard/spend_margin.v1.json")["margin"]
    assert 0 < metered * margin <= max(ceilings)
    assert len(_attempts(tmp_path)) == stored_runs < 4  # each alone would have run both of its runs
    assert any("not launched stay missing" in err for _, _, err in results)
    ledger = spend_ledger(ledger_path(tmp_path / "sabot.duckdb"), "test")  # the file, or the shared Postgres when set
    settled, reserved = ledger.totals("provider")
    assert reserved == 0 and settled == pytest.approx(metered)  # nothing held after both commands ended


def test_a_replay_made_with_provider_variables_set_never_satisfies_a_live_wave(
    registry, tmp_path, provider, monkeypatch
):
    from sabot_assets.definitions import build_definitions
    from sabot_assets.wave_jobs import Slice, run_wave

    selection = Slice(("langgraph",), ("default",), ("T1",), ("O1",))
    store_path = tmp_path / "sabot.duckdb"

    def wave(**kwargs):
        directory = tmp_path / f"dagster-{len(list(tmp_path.glob('dagster-*')))}"
        directory.mkdir()
        with dg.instance_for_test(temp_dir=str(directory)) as instance:
            defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
            return run_wave(registry, defs, instance, "demo", selection=selection, **kwargs)

    assert wave().tally.ran == 2  # the scripted model: the runs a replay answers from
    monkeypatch.setenv("SABOT_MODEL_BASE_URL", provider.base_url)
    monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-test")
    replayed = wave(replay=True)
    assert replayed.tally.ran == 2 and provider.exchanges == []
    with connect(store_path, read_only=True) as con:
        stamps = con.execute("SELECT endpoint FROM attempts WHERE wave = 'demo' AND attempt = 2").fetchall()
    assert len(stamps) == 2 and all(
        e.startswith("replay of demo/langgraph/default/T1/") and "simulation" in e for (e,) in stamps
    )

    live = wave()
    assert live.tally.ran == 2 and live.tally.reused == 0  # every cell called at the provider
    assert len(provider.exchanges) >= 2


def test_two_commands_on_one_slice_run_each_cell_once(tmp_path):
    commands = [_sabot(tmp_path, *SLICE, "--task", "T1") for _ in range(2)]
    results = [_finish(c) for c in commands]
    for code, _out, err in results:
        assert code == 0 and "Traceback" not in err, err[-3000:]
    slots = {}
    for attempt in _attempts(tmp_path):
        slots.setdefault(attempt.parent, []).append(attempt)
    assert len(slots) == 2 and all(len(a) == 1 for a in slots.values())  # two cells, one attempt each
    assert sorted(out.count("RUN_ERROR: 0") for _, out, _ in results) == [1, 1]


CHILD = textwrap.dedent("""
    import sys
    from adapters.pool import run_many
    from tests.parent_watch_helper import sleep_and_report

    if __name__ == "__main__":
        for _ in run_many(sleep_and_report, [sys.argv[1]], 1):
            pass
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state not in ("Z", "X")


def test_the_fork_server_and_its_runs_exit_when_their_command_is_killed(tmp_path):
    report = tmp_path / "pids.json"
    script = tmp_path / "command.py"
    script.write_text(CHILD)
    command = subprocess.Popen(
        [sys.executable, str(script), str(report)], cwd=PROJECT, env={**os.environ, "PYTHONPATH": str(PROJECT)}
    )
    deadline = time.monotonic() + 120
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = json.loads(report.read_text())
    assert _alive(pids["run"]) and _alive(pids["fork_server"])
    command.send_signal(signal.SIGKILL)
    command.wait()
    deadline = time.monotonic() + 10
    while (_alive(pids["run"]) or _alive(pids["fork_server"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pids["fork_server"]) and not _alive(pids["run"])
