"""A real local model server as the provider, end to end: llama-cpp-python serving the registry's
Gemma 3 270M GGUF on 127.0.0.1 (scripts/local_model.sh), a baseline and two operators of T1 for
LangGraph and CrewAI through `sabot wave run`. The wave completes with each cell's named outcome, is
labelled a local model's ($0 local, never simulation, no median or band), and, with the server stopped, a
replay of its stored exchanges gives the same verdicts without a call.

The server is built once per machine (~15 min on 2 cores) into the machine's cache. CI starts that
build in the background as it begins and sets SABOT_REQUIRE_LOCAL_MODEL=1: this test then waits for
the build and fails, never skips, without the server. Elsewhere it skips until the server is built.
The bundled model is a base model: it never solves T1, so its cells are honestly BASELINE_FAIL or
RUN_ERROR; the test checks the harness, not the model.
"""

import json
import os
import socket
import subprocess
import time

import pytest

from tests.conftest import PROJECT

SCRIPT = PROJECT / "scripts" / "local_model.sh"
REQUIRE_ENV = "SABOT_REQUIRE_LOCAL_MODEL"
SELECTION = [
    "--framework",
    "langgraph",
    "--framework",
    "crewai",
    "--config",
    "default",
    "--task",
    "T1",
    "--operator",
    "O1",
    "--operator",
    "O2",
]
# The registered local_model profile, with a smaller completion limit so the slice fits CI's time:
# a base model never ends its turn, so every call generates to the limit.
SLICE_PROFILE = {
    "max_concurrent_calls": 1,
    "max_completion_tokens": 64,
    "first_byte_timeout_seconds": 240,
    "total_timeout_seconds": 300,
    "call_timeout_seconds": 300,
    "max_total_seconds": 600,
    "retry_timeouts": False,
}
OUTCOMES = {None, "BASELINE_FAIL", "RUN_ERROR", "INJECTION_UNVERIFIED"}  # None: a valid, scored cell
MODEL_ALIAS = "gemma-3-270m-q4_k_m"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def local_server():
    if subprocess.run(["bash", str(SCRIPT), "installed"]).returncode != 0:
        if not os.environ.get(REQUIRE_ENV):
            pytest.skip(
                "the local model server is not built on this machine: `bash scripts/local_model.sh install` builds it once"
            )
        built = subprocess.run(
            ["bash", str(SCRIPT), "install"], capture_output=True, text=True, timeout=3600
        )  # waits for CI's background build
        assert built.returncode == 0, f"the local model server did not build: {built.stderr[-3000:]}"
    env = {**os.environ, "SABOT_LOCAL_MODEL_PORT": str(_free_port())}
    started = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=600)
    assert started.returncode == 0, started.stderr[-3000:]
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines() if line.startswith("export ")
    )
    stop = lambda: subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, text=True, timeout=60)  # noqa: E731
    try:
        yield exports, stop
    finally:
        stop()


def _sabot(args: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(
        [str(PROJECT / ".venv/bin/sabot"), *args], env=env, capture_output=True, text=True, timeout=1800
    )
    return done, time.monotonic() - started


def _verdicts(path) -> dict:
    doc = json.loads(path.read_text())
    return {
        (c["framework"], c["operator"]): {k: v for k, v in c.items() if k not in ("baseline_sha256", "fault_sha256")}
        for c in doc["cells"]
    }


def test_a_slice_against_the_real_local_server_completes_labelled_and_replays_with_no_call(local_server, tmp_path):
    exports, stop_server = local_server
    policy = tmp_path / "slice_policy.json"
    policy.write_text(json.dumps({"profiles": {"local_model": SLICE_PROFILE}}))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_MODEL_API_KEY")
    }
    env.update(SABOT_VAR=str(tmp_path / "var"), SABOT_CALL_POLICY=str(policy), **exports)
    base_url = exports["SABOT_MODEL_BASE_URL"]

    live, live_seconds = _sabot(["wave", "run", "demo", *SELECTION, "--json", str(tmp_path / "live.json")], env)
    assert live.returncode in (0, 1), f"the wave finished, RUN_ERROR cells at most (exit 1): {live.stderr[-3000:]}"
    assert f"demo: model endpoint: local model {MODEL_ALIAS} at {base_url}" in live.stdout, live.stdout[:2000]
    live_doc = json.loads((tmp_path / "live.json").read_text())
    assert live_doc["label"] == "local model", (
        "a local model's wave is labelled so, never simulation (sabot.provenance)"
    )
    cells = _verdicts(tmp_path / "live.json")
    assert set(cells) == {(fw, op) for fw in ("langgraph", "crewai") for op in ("O1", "O2")}
    for cell in cells.values():
        assert cell["excluded"] in OUTCOMES and cell["status"], cell
    spend = live_doc["spend"]
    assert spend["calls"] > 0 and spend["cost_usd"] == 0 and spend["unpriced_calls"] == 0, spend
    assert spend["endpoints"] == [f"local model {MODEL_ALIAS} at {base_url}"]
    assert "local model usage: $0 local" in live.stdout and "simulated usage" not in live.stdout
    print(
        f"\nlocal model slice: {len(cells)} cells, {spend['calls']} calls, {spend['completion_tokens']} completion tokens, "
        f"live {live_seconds:.0f} s; outcomes {sorted(str(c['excluded']) for c in cells.values())}"
    )

    stop_server()  # from here any call would fail: the replay must make none
    replay, replay_seconds = _sabot(
        ["wave", "run", "demo", *SELECTION, "--replay", "--json", str(tmp_path / "replay.json")], env
    )
    assert replay.returncode == live.returncode, replay.stderr[-3000:]
    assert _verdicts(tmp_path / "replay.json") == cells, "the replay gives the same verdicts"
    assert json.loads((tmp_path / "replay.json").read_text())["spend"]["cost_usd"] == 0
    print(f"local model slice replay: {replay_seconds:.0f} s, no call")
