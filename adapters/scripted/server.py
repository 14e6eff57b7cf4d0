"""A scripted OpenAI-compatible model server: the HTTP/protocol layer only.

Real agent frameworks (openai SDK, langchain-openai, CrewAI, AutoGen) talk to this
server over real HTTP on 127.0.0.1. What to answer is decided by a pluggable
``Responder``; this module only turns its ``Reply`` into the wire format the
clients expect (plain JSON or SSE streams; the shapes are adapters/scripted/wire.py) and records
every exchange in memory.

Stdlib only, and nothing is ever written to disk.
"""

from __future__ import annotations

import bisect
import copy
import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from adapters.scripted.latency import Latency
from adapters.scripted.reply import Reply, Responder
from adapters.scripted.wire import completion_body, error_body, redact_headers, route_of, stream_chunks

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())  # quiet unless the application configures logging

CHAT_ROUTE = "/chat/completions"
MODELS_ROUTE = "/models"


# ---------------------------------------------------------------------------
# HTTP handling
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one request produced: a JSON body or a list of SSE chunks, plus bookkeeping."""

    status: int
    body: dict | bytes | None = None  # bytes: sent exactly as given
    chunks: list[dict] | None = None
    model: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so clients get proper chunked SSE; every response closes its connection
    # so stop() never has to wait on idle keep-alive sockets and pools never hold stale ones.
    protocol_version = "HTTP/1.1"
    timeout = 30  # a client that connects and goes silent must not pin a thread forever
    server: "_HTTPServer"

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    do_PUT = do_DELETE = do_PATCH = do_GET

    def version_string(self) -> str:
        return "ScriptedModelServer/1"

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet by default: http.server writes to stderr; route it to debug logging instead.
        log.debug("%s %s", self.address_string(), format % args)

    def _handle(self) -> None:
        owner = self.server.owner
        n = owner._next_number()
        headers = redact_headers(self.headers)
        request = self._read_json()
        outcome = owner._dispatch(n, self.command, self.path, request)
        delay = owner.latency.delay(n)
        if delay:
            time.sleep(delay)  # in this request's own thread: concurrent calls wait side by side
        reply = outcome.chunks if outcome.chunks is not None else outcome.body
        # Recorded before sending: a client that has its answer must already see the exchange.
        owner._record(
            {
                "n": n,
                "path": self.path,
                "request": request,
                "reply": reply,
                "model": outcome.model,
                "status": outcome.status,
                "headers": headers,
            }
        )
        if outcome.chunks is not None:
            self._send_stream(n, outcome.chunks)
        else:
            self._send_json(n, outcome.status, outcome.body, outcome.headers)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return b""  # a malformed length reads as an empty body, which the router rejects
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # skip trailers
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF after each chunk

    def _read_json(self) -> Any:
        """The parsed body; {} when empty, the raw text when it is not JSON (the router rejects it)."""
        raw = self._read_body()
        if not raw.strip():
            return {}
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _send_json(self, n: int, status: int, body: dict | bytes | None, headers=()) -> None:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers:
                self.send_header(name, value)
            self._common_headers(n)
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            log.debug("client of exchange %d went away before the reply", n)

    def _send_stream(self, n: int, chunks: list[dict]) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self._common_headers(n)
            for chunk in chunks:
                self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode("utf-8"))
            self._write_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")  # end of the chunked body
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            log.debug("client of exchange %d went away mid-stream", n)

    def _common_headers(self, n: int) -> None:
        self.send_header("x-request-id", f"req_{n}")
        self.send_header("Connection", "close")
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        # One HTTP chunk per SSE event, flushed, so clients see a real incremental stream.
        self.wfile.write(f"{len(data):X}\r\n".encode("ascii") + data + b"\r\n")
        self.wfile.flush()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # an in-flight request never blocks interpreter exit or stop()

    def __init__(self, address: tuple[str, int], owner: "ScriptedModelServer", listening: socket.socket | None = None):
        self.owner = owner
        super().__init__(address, _Handler, bind_and_activate=listening is None)
        if (
            listening is not None
        ):  # bound and listening already, by the process that chose the port (adapters.byo.double)
            self.socket.close()
            self.socket, self.server_address = listening, listening.getsockname()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints tracebacks to stderr; keep them in logging instead.
        log.warning("error while serving %s", client_address, exc_info=True)


# ---------------------------------------------------------------------------
# Public server
# ---------------------------------------------------------------------------


class ScriptedModelServer:
    """An OpenAI-compatible HTTP server whose answers come from a responder callable."""

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        models: tuple[str, ...] = (),
        latency: Latency | None = None,
        dated: str | None = None,
        listening: socket.socket | None = None,
    ):
        self.responder = responder
        self.listening = listening  # a socket to serve on, already listening (its port then is its own)
        # `dated` ("2026-07-01"): report each served id as that dated snapshot, as providers do
        # (gpt-5.6-luna served as gpt-5.6-luna-2026-07-01).
        self.dated = dated
        self.latency = latency or Latency()
        self.host = host
        self.port = port
        self.exchanges: list[dict] = []
        self._fixed_models = tuple(models)
        self._seen_models: list[str] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> "ScriptedModelServer":
        if self._httpd is not None:
            raise RuntimeError("ScriptedModelServer already started")
        self._httpd = _HTTPServer((self.host, self.port), self, self.listening)
        self.port = self._httpd.server_address[1]  # the real port when 0 asked for a free one
        # A short poll interval so stop() returns promptly instead of after up to 0.5 s.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model-server:{self.port}",
            daemon=True,
        )
        self._thread.start()
        log.debug("scripted model server listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None
        log.debug("scripted model server on port %s stopped", self.port)

    def __enter__(self) -> "ScriptedModelServer":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("base_url is known once the server is started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def models(self) -> list[str]:
        """The fixed model ids followed by every other id requested or served so far."""
        with self._lock:
            return list(dict.fromkeys((*self._fixed_models, *self._seen_models)))

    # -- bookkeeping (called from handler threads) ---------------------------

    def _next_number(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _record(self, exchange: dict) -> None:
        # Kept ordered by arrival number even when concurrent requests finish out of order.
        with self._lock:
            bisect.insort(self.exchanges, exchange, key=lambda e: e["n"])

    def _remember_models(self, *ids: Any) -> None:
        with self._lock:
            for model in ids:
                if isinstance(model, str) and model and model not in self._seen_models:
                    self._seen_models.append(model)

    # -- routing -------------------------------------------------------------

    def _dispatch(self, n: int, method: str, path: str, request: Any) -> Outcome:
        """Route one request; a bug in building the answer becomes a 500, never a dead connection."""
        try:
            return self._route(n, method, path, request)
        except Exception as exc:
            log.warning("failed to answer %s %s", method, path, exc_info=True)
            return Outcome(500, error_body(500, f"server error: {type(exc).__name__}: {exc}"))

    def _route(self, n: int, method: str, path: str, request: Any) -> Outcome:
        route = route_of(path)
        if method == "POST" and route == CHAT_ROUTE:
            return self._chat(n, path, request)
        if method == "GET" and route == MODELS_ROUTE:
            return Outcome(200, self._models_body())
        return Outcome(404, error_body(404, f"no route for {method} {path}"))

    def _models_body(self) -> dict:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.models]
        return {"object": "list", "data": data}

    def _chat(self, n: int, path: str, request: Any) -> Outcome:
        if not isinstance(request, dict):
            return Outcome(400, error_body(400, "request body must be a JSON object"))
        reply = self._ask_responder(request, path)
        model = reply.model or request.get("model") or "scripted"
        if self.dated:
            model = f"{model}-{self.dated}"
        self._remember_models(request.get("model"), model)
        if reply.status != 200:
            body = reply.body if reply.body is not None else error_body(reply.status, reply.error or "scripted error")
            return Outcome(reply.status, body, model=model, headers=reply.headers)
        if request.get("stream"):
            return Outcome(200, chunks=stream_chunks(n, model, request, reply), model=model)
        return Outcome(200, completion_body(n, model, request, reply), model=model)

    def _ask_responder(self, request: dict, path: str) -> Reply:
        """The responder's Reply; any failure becomes a 500 Reply so the server never dies."""
        try:
            # A deep copy: a responder that edits its input must not alter the recorded request.
            reply = self.responder({**copy.deepcopy(request), "path": path})
            if not isinstance(reply, Reply):
                raise TypeError(f"responder returned {type(reply).__name__}, not Reply")
            return reply
        except Exception as exc:  # the responder is foreign code; report, never crash
            log.warning("responder failed on %s", path, exc_info=True)
            return Reply(status=500, error=f"responder error: {type(exc).__name__}: {exc}")
