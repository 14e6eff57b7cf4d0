"""The model gateway: an OpenAI-compatible forwarding proxy on 127.0.0.1 in front of the upstream.

Every pipeline's clients point here, so one seam serves every framework (and a user's own pipeline):
- the call policy (adapters/gateway/policy.py): exponential backoff with jitter on 429, 5xx,
  timeouts and connection errors, honouring Retry-After, bounded in attempts and seconds (tenacity);
  a per-call timeout and a per-run wall limit;
- one rate limiter per endpoint, shared across processes (adapters/gateway/limiter.py);
- a provider run's registered bounds (sabot.budget.RunBound: calls, and metered spend up to what a
  pilot run reserves), checked before each call: a call that could pass them is not sent and the
  run is RUN_ERROR naming the bound (a rerun would be cut again, so no retry-once);
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

Every error answer is classified by the registered taxonomy (adapters/gateway/taxonomy.py): a
retryable one is retried and counted on the endpoint's host-wide breaker (limiter.CircuitState);
an endpoint-fatal one (401, 403, quota) opens that breaker at once and stops the run
(EndpointStopped: the cell stays missing); a cell-fatal one (404 model, 400, 422) fails the run
(CellFailed: RUN_ERROR naming the model and the provider's message). A Retry-After pauses the
endpoint for every process; past the policy's ceiling it stops the wave, naming the header. The key,
and in an error body any Authorization value, is replaced before a reply is recorded or handed on:
in the raw bytes in every escaped spelling (JSON `\\uXXXX` and `\\/`, URL `%XX`), and again in the
decoded reply and in the provider's message where a failure is built from it, so no decoding step
downstream (store, run root, breaker state, logs, terminal) can restore it.

This module holds the run's gateway (its lifecycle, forwarding and the HTTP server); beside it:
admission.py (may a call be sent: breaker, wall limit, the run's bound, rate limit), sending.py
(sending it: retries with backoff, call slots, one attempt judged), recording.py
(the exchange record, the answer a client gets, replay), provider_errors.py (an error answer by the
taxonomy, the scrubbed reply) and failures.py (what a run raises and the error body).
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from adapters.gateway.admission import admit
from adapters.gateway.exchange import estimate_tokens, redact_headers, request_key, route_of, with_completion_limit

# Defined here before the split, so still importable from here (adapters.gateway re-exports the failures).
from adapters.gateway.failures import (  # noqa: F401
    RUN_BOUND,
    CallBudgetSpent,
    CellFailed,
    EndpointStopped,
    ReplayMiss,
    _Retryable,
    _Stop,
    error_body,
)
from adapters.gateway.limiter import (
    CircuitState,
    EndpointLimiter,
    endpoint_circuit,
    endpoint_config,
    endpoint_limiter,
    limiter_dir,
)
from adapters.gateway.policy import CallPolicy
from adapters.gateway.provider_errors import reply_of, retry_after_seconds  # noqa: F401
from adapters.gateway.recording import asking_for_usage, deliver, give_up, record, replay, stopped
from adapters.gateway.sending import send
from adapters.gateway.transfer import CappedSender, CallSlots
from adapters.gateway.taxonomy import ProviderFailure, ProviderTaxonomy, Scrubber
from adapters.http_reply import send_reply

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

GATEWAY_KEY = "sk-gateway-local"  # what the pipelines' clients hold; the real key stays in Upstream


@dataclass(frozen=True)
class Upstream:
    base_url: str
    api_key: str = field(repr=False)
    label: str  # how the endpoint is named in records and errors (never carries the key)
    scripted: bool
    local_model: bool = False  # a local model server on this host: the call policy's local_model profile applies

    @property
    def limiter_id(self) -> str:
        # Per-run scripted servers are one logical endpoint; a provider is its base URL.
        return "scripted" if self.scripted else self.base_url.rstrip("/")


def circuit_of(upstream: Upstream, policy: CallPolicy) -> CircuitState:
    """The breaker of a provider endpoint (host-wide, or deployment-wide with SABOT_SHARED_STATE_URL),
    under the policy's threshold and open time, keyed to this base URL and key; a probe after the
    cool-down has one call's whole budget to decide."""
    return endpoint_circuit(
        upstream.limiter_id,
        policy.breaker_failures,
        policy.breaker_open_seconds,
        config=endpoint_config(upstream.base_url, upstream.api_key),
        probe_seconds=policy.max_total_seconds + policy.call_timeout_seconds,
    )


@functools.cache
def loopback_tls() -> ssl.SSLContext:
    """One verifying TLS context per process for the 127.0.0.1 upstreams: a new client would load the
    CA bundle again (~25 ms of CPU, paid by every client, several a run). Made in the fork
    server before it forks (adapters.fork_ready), so a run inherits it."""
    return httpx.create_ssl_context()


class ModelGateway:
    """One run's gateway: start it, point the clients at `base_url`, then `raise_for_calls()`."""

    def __init__(
        self,
        upstream: Upstream | None,
        policy: CallPolicy,
        cell: str,
        recording: list[dict] | None = None,
        limiter: EndpointLimiter | None = None,
        taxonomy: ProviderTaxonomy | None = None,
        circuit: CircuitState | None = None,
        bound=None,
        journal=None,
    ):
        if upstream is None and recording is None:
            raise ValueError("a gateway needs an upstream or a recording to answer from")
        policy = policy.for_endpoint(upstream.local_model) if upstream is not None else policy
        self.upstream, self.policy, self.cell = upstream, policy, cell
        self.replaying = recording is not None
        self._book: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        for exchange in recording or ():
            self._book[exchange["key"]].append(exchange)
        limit = policy.limit_for(upstream.scripted) if upstream else None
        self.limiter = limiter or (endpoint_limiter(upstream.limiter_id, limit) if limit else None)
        self.taxonomy = taxonomy or ProviderTaxonomy.registered()
        # The breaker guards a provider; per-run scripted servers and replays have none to guard.
        if circuit is None and upstream is not None and not upstream.scripted and not self.replaying:
            circuit = circuit_of(upstream, policy)
        self.circuit = circuit
        self.bound = (
            bound  # sabot.budget.RunBound: the run's calls and metered spend, enforced per call (a provider run)
        )
        self.journal = (
            None if self.replaying else journal
        )  # sabot.exchange_journal: each exchange on disk before its answer returns
        self.scrub = Scrubber(upstream.api_key if upstream else None)
        self.exchanges: list[dict] = []
        self.failure: str | None = None
        self.stop: ProviderFailure | None = None  # the endpoint may not be called: the run stops
        self.cell_failure: ProviderFailure | None = None  # the provider refused this run's request for good
        self.misses: list[str] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._deadline = time.monotonic() + policy.run_wall_limit_seconds
        self._client: httpx.Client | None = None
        self._capped: CappedSender | None = None  # sends through the endpoint's host-wide call slots, when capped
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------

    def __enter__(self) -> "ModelGateway":
        if self.upstream is not None and not self.replaying:
            loopback = "://127.0.0.1" in self.upstream.base_url or "://localhost" in self.upstream.base_url
            tls = (
                {"verify": loopback_tls()} if loopback else {}
            )  # a provider's keeps the deployment's own settings (SSL_CERT_FILE)
            self._client = httpx.Client(
                timeout=self.policy.http_timeout(self.policy.call_timeout_seconds), trust_env=not loopback, **tls
            )
            if self.policy.max_concurrent_calls:
                slots = CallSlots(self.upstream.limiter_id, self.policy.max_concurrent_calls, limiter_dir())
                self._capped = CappedSender(self._client, slots, drain_seconds=self.policy.max_total_seconds)
        self._httpd = _HTTPServer(("127.0.0.1", 0), self)
        # A short poll: shutdown() waits for the serve loop to notice, and a run's slot is held meanwhile.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"model-gateway:{self._httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
        if self._capped is not None:
            self._capped.drain()  # an abandoned call ends before the run does: its retry never queues behind it
        if self._client is not None:
            self._client.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def raise_for_calls(self) -> None:
        """After the pipeline: a replay miss stops everything; an endpoint that may not be called stops
        the run (also when this run's own failures opened it); a refused request fails the cell; a spent
        budget fails the run as infrastructure."""
        if self.misses:
            raise ReplayMiss(self.misses[0])
        if self.stop is not None:
            raise EndpointStopped(self.stop, list(self.exchanges))
        if self.cell_failure is not None:
            raise CellFailed(self.cell_failure, list(self.exchanges))
        if self.failure:
            opened = self.circuit.opened() if self.circuit is not None else None
            if opened:
                raise EndpointStopped(ProviderFailure.from_dict(opened), list(self.exchanges))
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
        raise ReplayMiss(
            f"replay of {self.cell}: recorded call {first.get('n')} ({first.get('method')} {route_of(first.get('path') or '')}, "
            f"model {model}, request key {first['key'][:16]}) was never asked for{more}; the run did not go as recorded"
        )

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
        if self.stop is not None:
            return 403, "application/json", error_body(f"not sent: {self.stop.message}", "endpoint_stopped")
        if self.failure:
            return 503, "application/json", error_body(f"not sent: {self.failure}")
        if self.replaying:
            return replay(self, n, method, path, key, body)
        started = time.monotonic()
        exchange = {
            "n": n,
            "method": method,
            "path": path,
            "key": key,
            "request": body,
            "headers": self.scrub.headers(redact_headers(headers)),
        }
        status, ctype, payload = self._forward(n, method, path, body, exchange)
        exchange["seconds"] = round(time.monotonic() - started, 3)
        record(self, exchange)
        return status, ctype, payload

    def _forward(self, n: int, method: str, path: str, body: Any, exchange: dict) -> tuple[int, str, bytes]:
        url = self.upstream.base_url.rstrip("/") + route_of(path)
        where = f"{self.upstream.label} ({method} {url})"
        model = body.get("model") if isinstance(body, dict) else None
        sent, asked_usage = asking_for_usage(body)
        sent, limit = with_completion_limit(sent, self.policy.max_completion_tokens)
        exchange.update(attempts=[], model=None, usage=None, reply=None, error=None)
        if limit is not None:
            exchange["completion_limit"] = limit
        tokens = estimate_tokens(sent)  # what is sent: the completion limit counts against a token window
        try:
            budget, held, refused = admit(
                self, exchange, where, model, sent, tokens
            )  # as sent: its completion limit bounds its worst case
        except _Stop as stop:
            return stopped(self, exchange, stop.failure)
        if refused is not None:
            return refused
        response, sending = None, time.monotonic()
        try:
            response = send(self, method, url, where, model, sent, exchange["attempts"], budget)
        except _Stop as stop:
            if stop.response is not None:
                exchange["upstream_reply"] = reply_of(self.scrub, stop.response)[0]
            return stopped(self, exchange, stop.failure)
        except _Retryable as exc:
            if exc.response is not None:
                exchange["upstream_reply"] = reply_of(self.scrub, exc.response)[0]
            status = exc.status or (504 if "timed out" in exc.detail else 502)
            return give_up(
                self,
                exchange,
                status,
                f"{where} {exc.detail} on call {n}; call budget spent after "
                f"{len(exchange['attempts'])} attempt(s) in {time.monotonic() - sending:.1f} s",
            )
        else:
            return deliver(self, response, exchange, asked_usage)
        finally:
            if held is not None:  # what the call cost (nothing, unanswered) replaces its hold on the run's bound
                self.bound.settle(
                    held,
                    exchange["model"] or model,
                    exchange["usage"],
                    response is not None and response.status_code < 400,
                    tokens,
                )


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
