"""A 127.0.0.1 OpenAI-compatible provider that fails the way real ones do, for the live-wave tests.

Modes (answers come from the scripted model wherever the mode does not fail the call):
- "401": every call refused with 401, the body echoing the key (as bad-key errors often do);
- "404-model": calls for `missing_model` (the O4 downgrade target) answered 404 "model does not exist";
- "400-echo": the first call answered 400 with the key and its Authorization header echoed back;
- "escaped-echo": the first call answered 400, every later one 401, each body echoing the key spelt
  with JSON escapes (`escape`: "slash" writes `\\/`, "unicode" writes `\\u002d`, "mixed" both and
  more), which a JSON decoder turns back into the key;
- "retry-after": every call answered 429 with `Retry-After: <retry_after>`;
- "quota": every call answered 429 insufficient_quota (billing exhausted);
- "hang": a plain socket server that accepts, reads and never answers;
- "dead": a port nothing listens on (connection refused);
- "max-usage": every call answered "ok", billed the most its request allows and no more: prompt tokens
  equal to the request's compact JSON length in bytes (no tokenizer counts more), completion tokens
  equal to its max_tokens (an honest provider at its worst), after `delay` seconds; with `usage_scale`
  above 1, that many times it (a provider billing past the request's own limits);
- "slow": every call answered after `delay` seconds (calls are in flight long enough to be killed in);
- "large-usage": every call answered, its usage reported at `usage_scale` times the scripted model's
  (a provider billing more than the run's registered bounds allow). The scripted server's usage
  function is swapped for the provider's lifetime: every scripted server of this process reports so,
  which in a wave is this provider alone (runs execute in processes of their own).
`calls` counts the requests that reached the provider (for "hang": connections accepted).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import adapters.scripted.wire as scripted_wire
from adapters.scripted.policy import ScriptedPolicy
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer

MODES = (
    "401",
    "404-model",
    "400-echo",
    "escaped-echo",
    "retry-after",
    "quota",
    "hang",
    "dead",
    "large-usage",
    "slow",
    "max-usage",
)


def escaped(key: str, escape: str) -> str:
    """The key as a JSON string's body may legally spell it (decoding gives the key back)."""
    if escape == "slash":
        return key.replace("/", "\\/")
    if escape == "unicode":
        return key.replace("-", "\\u002d")
    if escape == "mixed":  # upper- and lower-case hex, a letter escaped too, slashes escaped
        return key.replace("-", "\\u002D", 1).replace("-", "\\u002d").replace("/", "\\/").replace("k", "\\u006b", 1)
    raise ValueError(f"unknown escape {escape!r}; escapes: slash, unicode, mixed")


class _Responder:
    def __init__(self, provider: "FaultProvider"):
        self.provider = provider
        self.scripted = ScriptedPolicy("fault-provider", weak_model=provider.weak_model)

    def __call__(self, request: dict) -> Reply:
        p = self.provider
        with p.lock:
            p.stamps.append(time.monotonic())
            first = len(p.stamps) == 1
        if p.mode == "401":
            return Reply(
                status=401,
                error=f"Incorrect API key provided: {p.key}. You can find your API key at https://platform.example/account.",
            )
        if p.mode == "retry-after":
            return Reply(
                status=429,
                error="Rate limit reached; please retry later",
                headers=(("Retry-After", str(p.retry_after)),),
            )
        if p.mode == "quota":
            return Reply(
                status=429,
                error="You exceeded your current quota, please check your plan and billing details. (insufficient_quota)",
            )
        if p.mode == "404-model" and request.get("model") == p.missing_model:
            return Reply(
                status=404, error=f"The model `{p.missing_model}` does not exist or you do not have access to it."
            )
        if p.mode == "escaped-echo":
            status, said = (400, "Invalid request for key") if first else (401, "Incorrect API key provided")
            spelt = escaped(p.key, p.escape)
            body = '{"error": {"message": "%s: %s.", "type": "invalid_request_error", "param": "%s", "code": null}}' % (
                said,
                spelt,
                spelt,
            )
            return Reply(status=status, body=body.encode())
        if p.mode == "400-echo" and first:
            return Reply(
                status=400, error=f"Invalid request (headers received: Authorization: Bearer {p.key}; api_key={p.key})"
            )
        if p.mode in ("slow", "max-usage"):
            time.sleep(p.delay)
        reply = Reply(content="ok") if p.mode == "max-usage" else self.scripted(request)
        with p.lock:
            p.answered += reply.status == 200
        return reply


class FaultProvider:
    def __init__(
        self,
        mode: str,
        key: str = "",
        missing_model: str = "",
        weak_model: str = "gpt-5.6-luna",
        retry_after: int = 120,
        usage_scale: int = 1,
        escape: str = "mixed",
        delay: float = 0.0,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown fault mode {mode!r}; modes: {', '.join(MODES)}")
        self.mode, self.key, self.missing_model, self.weak_model, self.retry_after = (
            mode,
            key,
            missing_model,
            weak_model,
            retry_after,
        )
        self.usage_scale, self._usage_for, self.escape, self.delay = usage_scale, None, escape, delay
        self.lock = threading.Lock()
        self.stamps: list[float] = []  # when each request (or, hanging, each connection) arrived
        self.answered = 0  # requests answered 200
        self._server: ScriptedModelServer | None = None
        self._socket: socket.socket | None = None
        self._port = 0
        self._open: list[socket.socket] = []

    @property
    def calls(self) -> int:
        with self.lock:
            return len(self.stamps)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"  # still known once stopped: the tests name it afterwards

    def __enter__(self) -> "FaultProvider":
        if self.mode == "dead":
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            self._port = probe.getsockname()[1]
            probe.close()  # nothing listens there now: every connect is refused
        elif self.mode == "hang":
            self._socket = socket.socket()
            self._socket.bind(("127.0.0.1", 0))
            self._socket.listen(64)
            self._port = self._socket.getsockname()[1]
            threading.Thread(target=self._accept_forever, daemon=True).start()
        else:
            if self.mode in ("large-usage", "max-usage"):
                self._usage_for = scripted_wire.usage_for
                scripted_wire.usage_for = self._scaled_usage if self.mode == "large-usage" else self._most_allowed_usage
            self._server = ScriptedModelServer(_Responder(self)).start()
            self._port = self._server.port
        return self

    def _scaled_usage(self, request: dict, reply: Reply) -> dict:
        usage = self._usage_for(request, reply)
        prompt, completion = usage["prompt_tokens"] * self.usage_scale, usage["completion_tokens"] * self.usage_scale
        return {**usage, "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _most_allowed_usage(self, request: dict, reply: Reply) -> dict:
        body = {k: v for k, v in request.items() if k != "path"}
        prompt = len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()) * self.usage_scale
        completion = int(body.get("max_tokens") or 0) * self.usage_scale
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _accept_forever(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            with self.lock:
                self.stamps.append(time.monotonic())
                self._open.append(conn)  # held open, never answered

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.stop()
        if self._usage_for is not None:
            scripted_wire.usage_for, self._usage_for = self._usage_for, None
        if self._socket is not None:
            self._socket.close()
        for conn in self._open:
            conn.close()
