"""The model gateway: an OpenAI-compatible forwarding proxy on 127.0.0.1 in front of the upstream.

Every pipeline's clients point here, so one seam serves every framework (and a user's own pipeline):
- the call policy (adapters/gateway/policy.py): exponential backoff with jitter on 429, 5xx,
  timeouts and connection errors, honouring Retry-After, bounded in attempts and seconds (tenacity);
  a per-call timeout and a per-run wall limit;
- one rate limiter per endpoint, shared across processes (adapters/gateway/limiter.py);
- usage capture from JSON bodies and SSE streams (a stream is asked for its usage chunk, which is
  removed again when the client did not ask for it);
- a record of every exchange (request, reply, usage, attempts, timing; the key never stored: the
  clients hold a local placeholder and only the gateway sends the real key upstream);
- replay: with a recording, every request is answered from it and nothing is sent anywhere; a
  request the recording lacks is answered with an error and reported by `raise_for_calls`, never
  forwarded.

Upstream replies are read whole before the client sees a byte, so a failed stream is retried as a
whole and never half-delivered. Once one call's budget is spent the run is infrastructure-failed:
later calls are refused at once rather than spending more on a run that will be retried anyway.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import tenacity

from adapters.gateway.exchange import (estimate_tokens, parse_sse, redact_headers, render_sse, request_key,
                                       route_of, served_model, strip_usage_chunks, usage_of)
from adapters.gateway.limiter import EndpointLimiter, RateLimited
from adapters.gateway.policy import CallPolicy
from adapters.http_reply import send_reply

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

GATEWAY_KEY = "sk-gateway-local"  # what the pipelines' clients hold; the real key stays in Upstream


class CallBudgetSpent(ConnectionError):
    """A model call failed after the policy's whole budget: the run failed for infrastructure."""

    def __init__(self, message: str, exchanges: list[dict]):
        super().__init__(message)
        self.exchanges = exchanges


class ReplayMiss(RuntimeError):
    """A replayed run asked for an exchange its recording does not hold (never an infrastructure error:
    it must stop the replay, not be retried or stored as RUN_ERROR)."""


@dataclass(frozen=True)
class Upstream:
    base_url: str
    api_key: str = field(repr=False)
    label: str  # how the endpoint is named in records and errors (never carries the key)
    scripted: bool

    @property
    def limiter_id(self) -> str:
        # Per-run scripted servers are one logical endpoint; a provider is its base URL.
        return "scripted" if self.scripted else self.base_url.rstrip("/")


class _Retryable(Exception):
    def __init__(self, detail: str, status: int | None = None, retry_after: float | None = None, response=None):
        super().__init__(detail)
        self.detail, self.status, self.retry_after, self.response = detail, status, retry_after, response


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


def error_body(message: str, kind: str = "gateway_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()


class ModelGateway:
    """One run's gateway: start it, point the clients at `base_url`, then `raise_for_calls()`."""

    def __init__(self, upstream: Upstream | None, policy: CallPolicy, cell: str, recording: list[dict] | None = None,
                 limiter: EndpointLimiter | None = None):
        if upstream is None and recording is None:
            raise ValueError("a gateway needs an upstream or a recording to answer from")
        self.upstream, self.policy, self.cell = upstream, policy, cell
        self.replaying = recording is not None
        self._book: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        for exchange in recording or ():
            self._book[exchange["key"]].append(exchange)
        limit = policy.limit_for(upstream.scripted) if upstream else None
        self.limiter = limiter or (EndpointLimiter(upstream.limiter_id, limit) if limit else None)
        self.exchanges: list[dict] = []
        self.failure: str | None = None
        self.misses: list[str] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._deadline = time.monotonic() + policy.run_wall_limit_seconds
        self._client: httpx.Client | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------

    def __enter__(self) -> "ModelGateway":
        if self.upstream is not None and not self.replaying:
            loopback = "://127.0.0.1" in self.upstream.base_url or "://localhost" in self.upstream.base_url
            self._client = httpx.Client(timeout=self.policy.call_timeout_seconds, trust_env=not loopback)
        self._httpd = _HTTPServer(("127.0.0.1", 0), self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"model-gateway:{self._httpd.server_address[1]}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
        if self._client is not None:
            self._client.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def raise_for_calls(self) -> None:
        """After the pipeline: a replay miss stops everything; a spent budget fails the run."""
        if self.misses:
            raise ReplayMiss(self.misses[0])
        if self.failure:
            raise CallBudgetSpent(self.failure, list(self.exchanges))

    def raise_for_unused(self) -> None:
        """After a replayed run that finished: a recorded exchange it never asked for means the run
        did not go as recorded, a replay failure naming the call (as an extra call is)."""
        unused = sorted((e for queue in self._book.values() for e in queue), key=lambda e: e.get("n") or 0)
        if not unused:
            return
        first, request = unused[0], unused[0].get("request")
        model = request.get("model") if isinstance(request, dict) else None
        more = f", nor {len(unused) - 1} more recorded call(s)" if len(unused) > 1 else ""
        raise ReplayMiss(f"replay of {self.cell}: recorded call {first.get('n')} ({first.get('method')} {route_of(first.get('path') or '')}, "
                         f"model {model}, request key {first['key'][:16]}) was never asked for{more}; the run did not go as recorded")

    # -- one call -----------------------------------------------------------

    def handle(self, method: str, path: str, headers, raw: bytes) -> tuple[int, str, bytes]:
        with self._lock:
            self._counter += 1
            n = self._counter
        try:
            body: Any = json.loads(raw) if raw.strip() else {}
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        key = request_key(method, path, body)
        if self.failure:
            return 503, "application/json", error_body(f"not sent: {self.failure}")
        if self.replaying:
            return self._replay(n, method, path, key, body)
        started = time.monotonic()
        exchange = {"n": n, "method": method, "path": path, "key": key, "request": body, "headers": redact_headers(headers)}
        status, ctype, payload = self._forward(n, method, path, body, exchange)
        exchange["seconds"] = round(time.monotonic() - started, 3)
        self._record(exchange)
        return status, ctype, payload

    def _replay(self, n: int, method: str, path: str, key: str, body: Any) -> tuple[int, str, bytes]:
        with self._lock:
            queue = self._book.get(key)
            recorded = queue.popleft() if queue else None
        if recorded is None:
            model = body.get("model") if isinstance(body, dict) else None
            miss = (f"replay of {self.cell}: call {n} ({method} {route_of(path)}, model {model}, request key {key[:16]}) "
                    f"is not in the recording; nothing was sent")
            with self._lock:
                self.misses.append(miss)
            return 400, "application/json", error_body(miss, "replay_miss")
        exchange = {**recorded, "n": n}
        self._record(exchange)
        if exchange["status"] != 200:  # a failed exchange replays as the same failure, never a success
            self._fail(exchange.get("error") or f"recorded call {n} failed with status {exchange['status']}")
        reply = exchange["reply"]
        if isinstance(reply, list):
            return exchange["status"], "text/event-stream; charset=utf-8", render_sse(reply)
        if isinstance(reply, str):
            return exchange["status"], "text/plain", reply.encode()
        return exchange["status"], "application/json", json.dumps(reply).encode()

    def _forward(self, n: int, method: str, path: str, body: Any, exchange: dict) -> tuple[int, str, bytes]:
        upstream, policy = self.upstream, self.policy
        url = upstream.base_url.rstrip("/") + route_of(path)
        where = f"{upstream.label} ({method} {url})"
        asked_usage = True
        sent = body
        if isinstance(body, dict) and body.get("stream"):
            asked_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            if not asked_usage:  # ask the stream for its usage, so spend is recorded; stripped below
                sent = {**body, "stream_options": {**(body.get("stream_options") or {}), "include_usage": True}}
        budget = min(policy.max_total_seconds, self._deadline - time.monotonic())
        attempts: list[dict] = []
        exchange.update(attempts=attempts, model=None, usage=None, reply=None, error=None)
        if budget <= 0:
            return self._give_up(exchange, 504, f"{where}: the run's wall limit of {policy.run_wall_limit_seconds:g} s is spent")
        if self.limiter is not None:
            try:
                self.limiter.admit(estimate_tokens(body), timeout=budget)
            except RateLimited as exc:
                return self._give_up(exchange, 429, f"{where}: {exc}")
        call_started = time.monotonic()
        content = json.dumps(sent).encode() if not isinstance(sent, str) else sent.encode()
        send_headers = {"Content-Type": "application/json", "Authorization": f"Bearer {upstream.api_key}",
                        "Accept": "application/json, text/event-stream"}

        def attempt() -> httpx.Response:
            t0 = time.monotonic()
            timeout = max(0.1, min(policy.call_timeout_seconds, call_started + budget - t0))
            try:
                response = self._client.request(method, url, content=content if method != "GET" else None,
                                                headers=send_headers, timeout=timeout)
            except httpx.TimeoutException as exc:
                attempts.append({"status": None, "error": f"timeout after {timeout:.1f} s", "seconds": round(time.monotonic() - t0, 3)})
                raise _Retryable(f"timed out after {timeout:.1f} s ({type(exc).__name__})") from exc
            except httpx.TransportError as exc:
                attempts.append({"status": None, "error": f"{type(exc).__name__}: {exc}", "seconds": round(time.monotonic() - t0, 3)})
                raise _Retryable(f"connection failed ({type(exc).__name__}: {exc})") from exc
            entry = {"status": response.status_code, "error": None, "seconds": round(time.monotonic() - t0, 3)}
            attempts.append(entry)
            if response.status_code in policy.retry_on_status:
                wait = retry_after_seconds(response.headers.get("retry-after"))
                entry["retry_after"] = wait
                raise _Retryable(f"answered {response.status_code}", response.status_code, wait, response)
            return response

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retryable),
            wait=self._wait,
            stop=(tenacity.stop_after_attempt(policy.max_attempts) | tenacity.stop_before_delay(budget) | self._stop_on_long_retry_after),
            sleep=time.sleep,
            reraise=True,
        )
        try:
            response = retrying(attempt)
        except _Retryable as exc:
            spent = time.monotonic() - call_started
            status = exc.status or (504 if "timed out" in exc.detail else 502)
            if exc.response is not None:
                exchange["upstream_reply"] = _reply_of(exc.response)[0]
            message = f"{where} {exc.detail} on call {n}; call budget spent after {len(attempts)} attempt(s) in {spent:.1f} s"
            return self._give_up(exchange, status, message)
        reply, ctype = _reply_of(response)
        exchange["usage"] = usage_of(reply)
        if isinstance(reply, list) and not asked_usage:
            reply = strip_usage_chunks(reply)
        exchange.update(status=response.status_code, reply=reply, model=served_model(reply))
        if isinstance(reply, list):
            return response.status_code, ctype, render_sse(reply)
        return response.status_code, ctype, response.content

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        """Exponential backoff with jitter; never shorter than the server's Retry-After."""
        policy = self.policy
        backoff = tenacity.wait_exponential_jitter(initial=policy.initial_backoff_seconds, max=policy.max_backoff_seconds,
                                                   jitter=policy.jitter_seconds)(retry_state)
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        return max(backoff, retry_after) if retry_after is not None else backoff

    def _stop_on_long_retry_after(self, retry_state: tenacity.RetryCallState) -> bool:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        return retry_after is not None and retry_after > self.policy.max_retry_after_seconds

    def _give_up(self, exchange: dict, status: int, message: str) -> tuple[int, str, bytes]:
        payload = error_body(message)
        exchange.update(status=status, error=message, reply=json.loads(payload))
        self._fail(message)
        return status, "application/json", payload

    def _fail(self, message: str) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = message
                log.warning("%s: %s", self.cell, message)

    def _record(self, exchange: dict) -> None:
        with self._lock:
            self.exchanges.append(exchange)
            self.exchanges.sort(key=lambda e: e["n"])


def _reply_of(response: httpx.Response) -> tuple[Any, str]:
    """The reply as recorded (JSON object, SSE chunk list or text) and its content type."""
    ctype = response.headers.get("content-type", "application/json")
    if "event-stream" in ctype:
        chunks = parse_sse(response.content)
        if chunks is not None:
            return chunks, ctype
    try:
        return response.json(), ctype
    except ValueError:
        return response.text, ctype


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: "_HTTPServer"

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _handle(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            status, ctype, payload = self.server.gateway.handle(self.command, self.path, self.headers, raw)
        except Exception as exc:  # a gateway bug must answer, never leave the client hanging
            log.warning("gateway failed on %s %s", self.command, self.path, exc_info=True)
            status, ctype, payload = 500, "application/json", error_body(f"gateway error: {type(exc).__name__}: {exc}")
        send_reply(self, status, ctype, payload)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, gateway: ModelGateway):
        self.gateway = gateway
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("error while serving %s", client_address, exc_info=True)
