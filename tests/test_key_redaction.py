"""A provider error body that echoes the key in a JSON-escaped spelling (`\\/`, `\\u002d`, both mixed):
a JSON decoder turns it back into the key, so it must be removed in every spelling before and after
decoding. A whole `sabot wave run` against such a provider leaves the key nowhere: not in the store,
the run root, the breaker's state, Dagster's storage (all under SABOT_VAR) nor the terminal.
"""

import json
import os
import subprocess
from pathlib import Path

import openai
import pytest

from adapters.gateway import CallPolicy, ModelGateway, Upstream
from sabot.store.db import connect
from tests.fault_provider import FaultProvider, escaped

PROJECT = Path(__file__).resolve().parents[1]
KEY = "sk-proj-LEAK/CHECK-7f3a9c2e1b-x"  # a slash and dashes: both have escaped spellings
QUICK_POLICY = {
    "retry": {
        "max_attempts": 2,
        "initial_backoff_seconds": 0.05,
        "max_backoff_seconds": 0.2,
        "jitter_seconds": 0.05,
        "max_retry_after_seconds": 5,
    },
    "call_timeout_seconds": 5,
    "connect_timeout_seconds": 1,
    "first_byte_timeout_seconds": 5,
    "breaker": {"consecutive_failures": 3, "open_seconds": 600},
}
ESCAPES = ("slash", "unicode", "mixed")


def spellings() -> list[bytes]:
    """The key as stored text could hold it: plain, each escaped spelling, and as json.dumps writes it."""
    forms = {KEY, json.dumps(KEY)[1:-1], *(escaped(KEY, e) for e in ESCAPES)}
    return [form.encode() for form in forms]


def files_holding_the_key(root: Path) -> list[str]:
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and any(form in path.read_bytes() for form in spellings())
    ]


def store_tables_holding_the_key(store: Path) -> list[str]:
    """Read through DuckDB, not its file: a column may be stored compressed, where no byte search finds it."""
    with connect(store, read_only=True) as con:
        tables = [
            name
            for (name,) in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        ]
        return [
            name
            for name in tables
            if any(form.decode() in repr(con.execute(f'SELECT * FROM "{name}"').fetchall()) for form in spellings())
        ]


@pytest.mark.parametrize("escape", ESCAPES)
def test_the_gateway_never_hands_on_or_records_an_escaped_key(escape, tmp_path):
    policy = CallPolicy.from_doc(
        {
            **QUICK_POLICY,
            "run_wall_limit_seconds": 60,
            "limits": {},
            "retry": {**QUICK_POLICY["retry"], "max_total_seconds": 20, "retry_on_status": [429, 500, 502, 503]},
        }
    )
    with FaultProvider("escaped-echo", key=KEY, escape=escape) as provider:
        with ModelGateway(Upstream(provider.base_url, KEY, "provider test", scripted=False), policy, "cell") as gateway:
            client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
            with pytest.raises(openai.BadRequestError) as refused:
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    seen = json.dumps([gateway.exchanges, gateway.cell_failure.as_dict(), refused.value.body, str(refused.value)])
    assert KEY not in seen and "[redacted]" in gateway.cell_failure.message, gateway.cell_failure.message
    assert not any(form.decode() in seen for form in spellings())


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_wave_against_a_provider_echoing_the_key_escaped_leaves_it_nowhere(escape, tmp_path):
    """The first call is refused 400 (that run is RUN_ERROR: the store and the run root hold its error),
    every later one 401 (the endpoint's breaker opens: its state file holds the message; the wave stops)."""
    policy = tmp_path / "quick.json"
    policy.write_text(json.dumps(QUICK_POLICY))
    var = tmp_path / "var"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_LIMITER_DIR")
    }
    args = ["wave", "run", "demo", "--framework", "langgraph", "--config", "default", "--task", "T1"]
    with FaultProvider("escaped-echo", key=KEY, escape=escape) as provider:
        env.update(
            SABOT_VAR=str(var),
            SABOT_MODEL_BASE_URL=provider.base_url,
            SABOT_MODEL_API_KEY=KEY,
            SABOT_CALL_POLICY=str(policy),
        )
        done = subprocess.run(
            [str(PROJECT / ".venv/bin/sabot"), *args], env=env, capture_output=True, text=True, timeout=600
        )
        calls = provider.calls
    output = done.stdout + done.stderr
    assert calls >= 2 and "answered 401: Incorrect API key provided: [redacted]" in output, output[-3000:]
    assert (var / "limiter").is_dir() and (var / "dagster").is_dir() and (var / "sabot.duckdb").is_file()
    assert not any(form.decode() in output for form in spellings())
    assert files_holding_the_key(var) == [] and store_tables_holding_the_key(var / "sabot.duckdb") == []
