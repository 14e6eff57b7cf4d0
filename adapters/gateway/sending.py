"""How a run's gateway sends one admitted call upstream: retried under the call policy (tenacity:
exponential backoff with jitter, never shorter than a Retry-After; the pauses a provider asks for and
the wait for a call slot not counted against the call's budget), through the endpoint's host-wide call
slots when it is capped, each attempt's answer judged by the taxonomy (adapters/gateway/provider_errors.py).
The functions take the run's ModelGateway (adapters/gateway/server.py) for the state they read and set."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import httpx
import tenacity

from adapters.gateway.admission import budget_spent, wait_for_endpoint
from adapters.gateway.failures import _Retryable
from adapters.gateway.provider_errors import infrastructure_failed, judge_error
from adapters.gateway.transfer import NoSlot, TotalTimeout, fetch


def send(
    gateway, method: str, url: str, where: str, model: str | None, sent: Any, attempts: list, budget: float
) -> httpx.Response:
    """The call under the policy: retried with backoff within its budget (Retry-After pauses not counted)."""
    call_started = time.monotonic()
    content = json.dumps(sent).encode() if not isinstance(sent, str) else sent.encode()
    send_headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {gateway.upstream.api_key}",
        "Accept": "application/json, text/event-stream",
    }
    paused = [0.0]  # seconds spent sitting out Retry-After pauses: the provider's ask, not this call's budget

    def attempt() -> httpx.Response:
        paused[0] += wait_for_endpoint(gateway, where, model)  # another process may have opened or paused it meanwhile
        slot, waited = take_slot(gateway, where)
        paused[0] += waited  # waiting for the server to be free is not this call's budget either
        timeout = gateway.policy.http_timeout(call_started + budget + paused[0] - time.monotonic())
        try:
            return attempt_once(gateway, method, url, content, send_headers, timeout, attempts, where, model, slot)
        except _Retryable as exc:
            paused[0] += exc.retry_after or 0.0  # the wait tenacity makes for it is not this call's budget either
            raise

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, _Retryable) and not exc.final),
        wait=functools.partial(retry_wait, gateway),
        stop=tenacity.stop_after_attempt(gateway.policy.max_attempts)
        | (lambda state: budget_spent(state, budget + paused[0])),
        sleep=time.sleep,
        reraise=True,
    )(attempt)


def take_slot(gateway, where: str):
    """(a held call slot of a capped endpoint, seconds waited for it); (None, 0) when uncapped."""
    if gateway._capped is None:
        return None, 0.0
    t0 = time.monotonic()
    try:
        return gateway._capped.slots.acquire(gateway._deadline - t0), time.monotonic() - t0
    except NoSlot as exc:
        raise _Retryable(f"{where}: {exc} (the run's wall limit)", final=True) from exc


def attempt_once(
    gateway,
    method: str,
    url: str,
    content: bytes,
    headers: dict,
    timeout,
    attempts: list,
    where: str,
    model: str | None,
    slot=None,
) -> httpx.Response:
    """One upstream request: its answer, or _Retryable/_Stop as the taxonomy decides."""
    t0 = time.monotonic()
    body = content if method != "GET" else None
    total = min(gateway.policy.attempt_seconds, timeout.write)  # timeout.write: what is left of the call's budget
    try:
        if slot is not None:
            response = gateway._capped.send(
                slot, method, url, body, headers, min(timeout.read, total), total, timeout.connect
            )
        else:
            response = fetch(gateway._client, method, url, body, headers, timeout, total)
    except httpx.TimeoutException as exc:
        phase, limit = _timeout_phase(exc, timeout, total)
        detail = f"timed out after {limit:.1f} s {phase} ({type(exc).__name__})"
        attempts.append(
            {
                "status": None,
                "error": f"timeout after {limit:.1f} s {phase}",
                "seconds": round(time.monotonic() - t0, 3),
            }
        )
        infrastructure_failed(gateway, where, model, None, detail)
        if not gateway.policy.retry_timeouts:
            detail += "; not sent again: the server may still be answering it (call policy retry_timeouts)"
        raise _Retryable(detail, final=not gateway.policy.retry_timeouts) from exc
    except httpx.TransportError as exc:
        detail = gateway.scrub.text(f"connection failed ({type(exc).__name__}: {exc})")
        attempts.append(
            {
                "status": None,
                "error": gateway.scrub.text(f"{type(exc).__name__}: {exc}"),
                "seconds": round(time.monotonic() - t0, 3),
            }
        )
        infrastructure_failed(gateway, where, model, None, detail)
        raise _Retryable(detail) from exc
    entry = {"status": response.status_code, "error": None, "seconds": round(time.monotonic() - t0, 3)}
    attempts.append(entry)
    if response.status_code < 400:
        if gateway.circuit is not None:
            gateway.circuit.succeeded()
        return response
    return judge_error(gateway, response, entry, where, model)


def retry_wait(gateway, retry_state: tenacity.RetryCallState) -> float:
    """Exponential backoff with jitter; never shorter than the server's Retry-After."""
    policy = gateway.policy
    backoff = tenacity.wait_exponential_jitter(
        initial=policy.initial_backoff_seconds, max=policy.max_backoff_seconds, jitter=policy.jitter_seconds
    )(retry_state)
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    retry_after = getattr(exc, "retry_after", None)
    return max(backoff, retry_after) if retry_after is not None else backoff


def _timeout_phase(exc: httpx.TimeoutException, timeout: httpx.Timeout, total: float) -> tuple[str, float]:
    """Where an attempt timed out, and after how long."""
    if isinstance(exc, TotalTimeout):
        return "before the answer ended", total
    if isinstance(exc, httpx.ConnectTimeout):
        return "connecting", timeout.connect
    if isinstance(exc, httpx.ReadTimeout):
        return "waiting for the first byte", timeout.read
    return "sending", timeout.write
