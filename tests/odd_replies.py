"""A 127.0.0.1 OpenAI-compatible server that answers every chat call with one kind of odd reply, the
kinds a real local model server returns and neither the scripted model nor the fault provider does:

- "empty": content "" and finish_reason "stop" (a base model ending at once);
- "null": content null, no tool call, finish_reason "stop";
- "no-stop": text cut by the completion limit, finish_reason "length" (a model that never ends its turn);
- "bad-tool-call": a tool call to a tool nobody offered, its arguments not JSON;
- "absent-tool-call": finish_reason "tool_calls" with no tool call at all;
- "wrong-role": the message in the "user" role;
- "garbage": a 200 whose body is not JSON at all (an HTML page, or a stream of non-JSON events).

Streamed requests get the same reply as server-sent events. `slow_seconds` delays every answer and
`trickle_seconds` sends the stream's pieces that far apart (for the timeout tests); `in_flight_peak`
and `spans` record how calls overlapped at the server.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KINDS = ("empty", "null", "no-stop", "bad-tool-call", "absent-tool-call", "wrong-role", "garbage")
MODEL_ID = "odd-replies-test-model"


def _message(kind: str) -> tuple[dict, str]:
    """(the reply's message, its finish_reason)."""
    if kind == "empty":
        return {"role": "assistant", "content": ""}, "stop"
    if kind == "null":
        return {"role": "assistant", "content": None}, "stop"
    if kind == "no-stop":
        return {
            "role": "assistant",
            "content": "The the the the the the the the the the the the the the the the",
        }, "length"
    if kind == "bad-tool-call":
        call = {"id": "call_odd_1", "type": "function", "function": {"name": "no_such_tool", "arguments": "{not json"}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    if kind == "absent-tool-call":
        return {"role": "assistant", "content": None}, "tool_calls"
    if kind == "wrong-role":
        return {"role": "user", "content": "VERDICT: APPROVE"}, "stop"
    raise ValueError(f"no message for {kind!r}")


def completion(kind: str, model: str, n: int) -> dict:
    message, finish = _message(kind)
    return {
        "id": f"chatcmpl-odd-{n}",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def stream_events(kind: str, model: str, n: int) -> list[bytes]:
    if kind == "garbage":
        return [b"data: <html>not an event</html>\n\n", b"data: [DONE]\n\n"]
    message, finish = _message(kind)
    delta = {k: v for k, v in message.items() if v is not None}
    if "tool_calls" in delta:
        delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(delta["tool_calls"])]
    base = {"id": f"chatcmpl-odd-{n}", "object": "chat.completion.chunk", "created": 1, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
    ]
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


class OddReplyServer:
    def __init__(self, kind: str, slow_seconds: float = 0.0, trickle_seconds: float = 0.0):
        if kind not in KINDS:
            raise ValueError(f"unknown reply kind {kind!r}; kinds: {', '.join(KINDS)}")
        self.kind, self.slow_seconds, self.trickle_seconds = kind, slow_seconds, trickle_seconds
        self.requests: list[dict] = []
        self.spans: list[tuple[float, float]] = []  # (arrived, answered) per chat call, monotonic
        self.in_flight = self.in_flight_peak = 0
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "OddReplyServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._send(
                    200,
                    "application/json",
                    [json.dumps({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}).encode()],
                )

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                arrived = time.monotonic()
                with server.lock:
                    server.requests.append(body)
                    n = len(server.requests)
                    server.in_flight += 1
                    server.in_flight_peak = max(server.in_flight_peak, server.in_flight)
                try:
                    time.sleep(server.slow_seconds)
                    model = body.get("model") or MODEL_ID
                    if body.get("stream"):
                        self._send(200, "text/event-stream", stream_events(server.kind, model, n))
                    elif server.kind == "garbage":
                        self._send(200, "text/html", [b"<html><body>upstream said something else</body></html>"])
                    else:
                        self._send(200, "application/json", [json.dumps(completion(server.kind, model, n)).encode()])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: the server finished its answer anyway, as a local model server does
                finally:
                    with server.lock:
                        server.in_flight -= 1
                        server.spans.append((arrived, time.monotonic()))

            def _send(self, status: int, ctype: str, pieces: list[bytes]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(sum(len(p) for p in pieces)))
                self.end_headers()
                for piece in pieces:
                    self.wfile.write(piece)
                    self.wfile.flush()
                    time.sleep(server.trickle_seconds)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
