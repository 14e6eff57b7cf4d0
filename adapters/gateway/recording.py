"""The exchange record of a run's gateway: each exchange kept (and journaled, before its answer
returns), the answer a client gets and how it is recorded (delivered, given up, stopped), the
replay of a recording, and the usage chunk a stream is asked for. The functions take the run's
ModelGateway (adapters/gateway/server.py) for the state they read and set."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from adapters.gateway.exchange import render_sse, route_of, served_model, strip_usage_chunks, usage_of
from adapters.gateway.failures import error_body
from adapters.gateway.provider_errors import reply_of
from adapters.gateway.taxonomy import ENDPOINT_FATAL, ProviderFailure

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


def asking_for_usage(body: Any) -> tuple[Any, bool]:
    """(the body to send, whether the client asked for usage): a stream is asked for its usage chunk, so
    spend is recorded; the chunk is stripped again when the client did not ask for it."""
    if not (isinstance(body, dict) and body.get("stream")):
        return body, True
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        return body, True
    return {**body, "stream_options": {**options, "include_usage": True}}, False


def replay(gateway, n: int, method: str, path: str, key: str, body: Any) -> tuple[int, str, bytes]:
    with gateway._lock:
        queue = gateway._book.get(key)
        recorded = queue.popleft() if queue else None
    if recorded is None:
        model = body.get("model") if isinstance(body, dict) else None
        miss = (
            f"replay of {gateway.cell}: call {n} ({method} {route_of(path)}, model {model}, request key {key[:16]}) "
            f"is not in the recording; nothing was sent"
        )
        with gateway._lock:
            gateway.misses.append(miss)
        return 400, "application/json", error_body(miss, "replay_miss")
    exchange = {**recorded, "n": n}
    record(gateway, exchange)
    if exchange["status"] != 200:  # a failed exchange replays as the same failure, never a success
        fail(gateway, exchange.get("error") or f"recorded call {n} failed with status {exchange['status']}")
    reply = exchange["reply"]
    if isinstance(reply, list):
        return exchange["status"], "text/event-stream; charset=utf-8", render_sse(reply)
    if isinstance(reply, str):
        return exchange["status"], "text/plain", reply.encode()
    return exchange["status"], "application/json", json.dumps(reply).encode()


def deliver(gateway, response: httpx.Response, exchange: dict, asked_usage: bool) -> tuple[int, str, bytes]:
    """The answer as recorded and as the client gets it (a stream without the usage chunk it never asked for)."""
    reply, ctype, payload = reply_of(gateway.scrub, response)
    exchange["usage"] = usage_of(reply)
    if isinstance(reply, list) and not asked_usage:
        reply = strip_usage_chunks(reply)
    exchange.update(status=response.status_code, reply=reply, model=served_model(reply))
    if response.status_code >= 400:  # cell-fatal: the client sees the provider's (scrubbed) answer
        exchange["error"] = gateway.cell_failure.message if gateway.cell_failure else None
    if isinstance(reply, list):
        return response.status_code, ctype, render_sse(reply)
    return response.status_code, ctype, payload


def stopped(gateway, exchange: dict, failure: ProviderFailure) -> tuple[int, str, bytes]:
    """The endpoint may not be called: this run stops (never RUN_ERROR) and sends nothing more."""
    payload = error_body(f"not sent: {failure.message}", "endpoint_stopped")
    exchange.update(
        status=failure.status if failure.kind == ENDPOINT_FATAL else 503,
        error=failure.message,
        reply=json.loads(payload),
    )
    with gateway._lock:
        if gateway.stop is None:
            gateway.stop = failure
            log.warning("%s: %s", gateway.cell, failure.message)
    # A 4xx the clients never retry: every framework gives up on the call at once.
    return (failure.status if failure.kind == ENDPOINT_FATAL and failure.status else 403), "application/json", payload


def give_up(gateway, exchange: dict, status: int, message: str) -> tuple[int, str, bytes]:
    message = gateway.scrub.text(message)
    payload = error_body(message)
    exchange.update(status=status, error=message, reply=json.loads(payload))
    fail(gateway, message)
    return status, "application/json", payload


def fail(gateway, message: str) -> None:
    with gateway._lock:
        if gateway.failure is None:
            gateway.failure = message
            log.warning("%s: %s", gateway.cell, message)


def record(gateway, exchange: dict) -> None:
    if gateway.journal is not None:  # durably, before the client gets the answer: a kill now loses no paid call
        gateway.journal.write(exchange)
    with gateway._lock:
        gateway.exchanges.append(exchange)
        gateway.exchanges.sort(key=lambda e: e["n"])
