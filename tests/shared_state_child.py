"""One process of the shared-state tests (tests/test_shared_state_postgres.py): it reaches the bounds
only through SABOT_SHARED_STATE_URL (and a var dir of its own), as a worker host would, and prints
what it saw as one JSON line. Usage: python tests/shared_state_child.py COMMAND ARG..."""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.gateway.limiter import endpoint_circuit, endpoint_limiter  # noqa: E402
from adapters.gateway.policy import RateLimit  # noqa: E402


def _await_start() -> None:
    """Say "ready" (imports done, connected), then wait for the start time the test sends on stdin,
    so the processes begin together and contend."""
    print("ready", flush=True)
    time.sleep(max(0.0, float(sys.stdin.readline()) - time.time()))


def reserve(ledger_path: str, host: str, attempts: str, amount: str, cap: str) -> dict:
    from sabot.store.ledger import spend_ledger

    ledger = spend_ledger(ledger_path, host)
    _await_start()
    fits = lambda settled, reserved, more: settled + reserved + more <= float(cap) + 1e-9  # noqa: E731
    won = [i for i in range(int(attempts)) if ledger.reserve(f"{host}-{i}", "provider", float(amount), fits)]
    return {"won": len(won), "backend": type(ledger).__name__, "holder": ledger.holder}


def hold(ledger_path: str, host: str) -> dict:
    """Reserve and exit without settling: a killed command's reservation."""
    from sabot.store.ledger import spend_ledger

    ledger = spend_ledger(ledger_path, host)
    ledger.reserve(f"held-by-{host}", "provider", 1.0, lambda *_: True)
    return {"holder": ledger.holder}


def trip(endpoint: str, config: str, message: str) -> dict:
    circuit = endpoint_circuit(endpoint, config=config)
    return {
        "open": circuit.trip(
            {"kind": "endpoint_fatal", "status": 401, "endpoint": endpoint, "model": None, "message": message}
        ),
        "backend": type(circuit).__name__,
    }


def probe(endpoint: str, config: str, open_seconds: str) -> dict:
    """Ask, after the cool-down, whether this process may send: (opened, wait, header)."""
    circuit = endpoint_circuit(endpoint, open_seconds=float(open_seconds), config=config)
    opened = circuit.opened()
    wait, header = circuit.paused_for()
    return {"opened": opened, "wait": wait, "header": header}


def admit(endpoint: str, calls: str, requests: str, window: str, tokens: str) -> dict:
    limiter = endpoint_limiter(
        endpoint, RateLimit(requests=int(requests), tokens=400_000, window_seconds=float(window))
    )
    _await_start()
    stamps = []
    for _ in range(int(calls)):
        limiter.admit(tokens=int(tokens), timeout=60)
        stamps.append(time.time())
    return {"stamps": stamps, "shared": limiter.shared}


def call(base_url: str, key: str) -> dict:
    """One model call through a gateway with no retry of its own: what the provider answered."""
    import openai

    from adapters.gateway import CallPolicy, ModelGateway, Upstream

    policy = CallPolicy.from_doc(
        {
            "retry": {
                "max_attempts": 1,
                "initial_backoff_seconds": 0.05,
                "max_backoff_seconds": 0.2,
                "jitter_seconds": 0.0,
                "max_retry_after_seconds": 10,
                "max_total_seconds": 20,
                "retry_on_status": [429],
            },
            "call_timeout_seconds": 5,
            "connect_timeout_seconds": 1,
            "first_byte_timeout_seconds": 2,
            "run_wall_limit_seconds": 60,
            "limits": {},
        }
    )
    upstream = Upstream(base_url, key, f"provider {base_url}", scripted=False)
    with ModelGateway(upstream, policy, "child") as gateway:
        _await_start()
        started = time.time()
        try:
            openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hello"}]
            )
            status = 200
        except openai.APIStatusError as exc:
            status = exc.status_code
    return {"status": status, "started": started, "backend": type(gateway.circuit).__name__}


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    print(json.dumps(globals()[command](*args)))
