"""How a run's gateway reads a provider's error answer, by the registered taxonomy (taxonomy.py):
retry it (counted on the endpoint's breaker), stop the endpoint, or fail the cell; and the reply as
recorded and handed on, the key scrubbed first. The functions take the run's ModelGateway
(adapters/gateway/server.py) for the state they read and set."""

from __future__ import annotations

import json
import logging
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from adapters.gateway.exchange import parse_sse
from adapters.gateway.failures import _Retryable, _Stop
from adapters.gateway.taxonomy import CELL_FATAL, ENDPOINT_FATAL, RETRYABLE, ProviderFailure, Scrubber, provider_message

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def judge_error(gateway, response: httpx.Response, entry: dict, where: str, model: str | None) -> httpx.Response:
    """An error answer, by the registered taxonomy: retry it, stop the endpoint, or fail the cell."""
    status = response.status_code
    text = gateway.scrub.data(response.content).decode("utf-8", errors="replace")
    said = gateway.scrub.text(provider_message(text))  # decoding may spell out what the raw text escaped
    kind = gateway.taxonomy.kind_of(status, text)
    if kind == ENDPOINT_FATAL:
        failure = ProviderFailure(
            ENDPOINT_FATAL, status, gateway.upstream.label, model, f"{where} answered {status}: {said}"
        )
        raise _Stop(trip(gateway, failure), response)
    if kind == RETRYABLE:
        header = response.headers.get("retry-after")
        wait = retry_after_seconds(header)
        entry["retry_after"] = wait
        if wait is not None and gateway.circuit is not None:
            gateway.circuit.pause(wait, header)  # every process on the host waits it out, not only this call
        if wait is not None and wait > gateway.policy.max_retry_after_seconds:
            failure = ProviderFailure(
                "retry_after",
                status,
                gateway.upstream.label,
                model,
                f"{where} answered {status} with Retry-After: {header}, past the ceiling of "
                f"{gateway.policy.max_retry_after_seconds:g} s (call_policy max_retry_after_seconds)",
            )
            raise _Stop(trip(gateway, failure), response)
        if status != 429:  # throttling is the provider working as asked; anything else is failure
            infrastructure_failed(gateway, where, model, status, f"answered {status}: {said}")
        raise _Retryable(f"answered {status}", status, wait, response)
    failure = ProviderFailure(
        CELL_FATAL, status, gateway.upstream.label, model, f"{where} answered {status} for model {model}: {said}"
    )
    if gateway.circuit is not None:
        gateway.circuit.succeeded()  # the endpoint is up and took the key: a half-open breaker's probe is answered
    with gateway._lock:
        gateway.cell_failure = gateway.cell_failure or failure
    log.warning("%s: %s", gateway.cell, failure.message)
    return response


def infrastructure_failed(gateway, where: str, model: str | None, status: int | None, detail: str) -> None:
    """Count one failed attempt on the endpoint's breaker; once it opens, this call stops too."""
    if gateway.circuit is None:
        return
    opened = gateway.circuit.failed(
        ProviderFailure(RETRYABLE, status, gateway.upstream.label, model, f"{where} {detail}").as_dict()
    )
    if opened:
        raise _Stop(ProviderFailure.from_dict(opened))


def trip(gateway, failure: ProviderFailure) -> ProviderFailure:
    return (
        ProviderFailure.from_dict(gateway.circuit.trip(failure.as_dict())) if gateway.circuit is not None else failure
    )


def reply_of(scrub: Scrubber, response: httpx.Response) -> tuple[Any, str, bytes]:
    """The reply as recorded (JSON object, SSE chunk list or text), its content type and the bytes
    the client gets: the key (and, in an error body, any Authorization value) replaced first."""
    raw = scrub.data(response.content, patterns=response.status_code >= 400)  # every escaped spelling too
    ctype = response.headers.get("content-type", "application/json")
    errors = response.status_code >= 400
    if "event-stream" in ctype:
        chunks = parse_sse(raw)
        if chunks is not None:
            return scrub.decoded(chunks, errors), ctype, raw
    try:
        return scrub.decoded(json.loads(raw), errors), ctype, raw
    except ValueError:
        return raw.decode("utf-8", errors="replace"), ctype, raw
