"""The model-endpoint seam: the fault layer, an OpenAI-compatible hop in front of the run's model gateway,
and the harness's end of the tool seam's channel (adapters/byo/tool_channel.py).

The team's pipeline is pointed here through the OpenAI SDK's own environment (OPENAI_BASE_URL,
OPENAI_API_KEY holding a placeholder), so no line of its code changes. Each request is attributed
to an agent by its system prompt (the project's `agents`), passed through the run's fault (a model
swapped for one agent, a message or context altered as the model sees it), and handed to the run's
model gateway (adapters/gateway), exactly as a built-in pipeline's calls are: the gateway applies
the call policy, the endpoint's rate limiter, usage capture, the record of every exchange and replay,
and it alone holds the provider key. The gateway's reply is relayed byte for byte; what it says
served the call (`model`) and what it answered are recorded as the agent's message, so landing is
judged from what actually reached the pipeline.

`FaultLayer` (agent attribution, the fault, the recording) is what this hop adds; `FaultProxy` is
only its HTTP carrier. The agent a request was attributed to travels to the gateway in the
`X-Sabot-Agent` header, which the gateway records with the exchange (never part of its replay key).
"""

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from adapters.byo.seams import SeamFault
from adapters.byo.tool_channel import CLAIM_PATH, RESULT_PATH, ChannelRefused, read_claim, read_result
from adapters.http_reply import send_reply
from sabot.recorder import Recorder
from sabot.trace import EventKind

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())
UNATTRIBUTED = "model"
AGENT_HEADER = "X-Sabot-Agent"


class FaultLayer:
    """Per request: who is asking, the request as the model sees it, and what came back."""

    def __init__(self, agents: dict[str, str], fault: SeamFault, recorder: Recorder):
        self.agents, self.fault, self.recorder = agents, fault, recorder
        self.lock = threading.Lock()
        self.agents_seen: set[str] = set()

    def agent_of(self, body: dict) -> str:
        system = "\n".join(
            _text(m.get("content")) for m in body.get("messages") or [] if m.get("role") in ("system", "developer")
        )
        for name, marker in self.agents.items():
            if marker and marker in system:
                return name
        return UNATTRIBUTED

    def before(self, body: dict) -> tuple[str, dict]:
        agent = self.agent_of(body)
        with self.lock:
            self.agents_seen.add(agent)
        return agent, self.fault.model_request(agent, body)

    def after(self, agent: str, path: str, sent: dict, status: int, reply) -> None:
        served, text = _served(reply)
        if status == 200:
            self.fault.model_reply(agent, served)  # an O4 landing is recorded before the reply it served
        if status == 200:
            with self.lock:
                self.recorder.record(agent, EventKind.AGENT_MSG, model_id=served, text=text)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _served(reply) -> tuple[str | None, str]:
    """(model id the upstream reports, the reply's text) of a JSON body or a list of SSE chunks."""
    if isinstance(reply, dict):
        message = ((reply.get("choices") or [{}])[0]).get("message") or {}
        text = message.get("content") or (json.dumps(message["tool_calls"]) if message.get("tool_calls") else "")
        return reply.get("model"), text
    if isinstance(reply, list):
        model = next((c.get("model") for c in reply if isinstance(c, dict) and c.get("model")), None)
        text = "".join(
            ((c.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
            for c in reply
            if isinstance(c, dict) and c.get("choices")
        )
        return model, text
    return None, ""


def _sse_chunks(raw: bytes) -> list:
    chunks = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            try:
                chunks.append(json.loads(line[5:]))
            except ValueError:
                pass
    return chunks


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300
    server: "_Server"

    def log_message(self, format, *args):
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self):
        self._forward(None)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send(
                400,
                "application/json",
                json.dumps(
                    {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}}
                ).encode(),
            )
        path = self.path.split("?", 1)[0]
        if path in (CLAIM_PATH, RESULT_PATH):
            return self._tool_channel(path, body)
        self._forward(body if isinstance(body, dict) else None)

    def _tool_channel(self, path: str, body) -> None:
        """A wrapped tool's question (adapters/byo/tool_channel.py), answered by the run's fault here."""
        fault = self.server.owner.layer.fault
        try:
            if path == CLAIM_PATH:
                replace = fault.claim(*read_claim(body))
            else:
                replace = fault.replacement(*read_result(body))
        except ChannelRefused as exc:
            error = {"error": {"message": str(exc), "type": "invalid_request_error"}}
            return self._send(400, "application/json", json.dumps(error).encode())
        self._send(200, "application/json", json.dumps({"replace": replace}).encode())

    def _forward(self, body):
        proxy = self.server.owner
        path = self.path.split("?", 1)[0]
        route = path[3:] if path.startswith("/v1/") else path
        chat = self.command == "POST" and route.rstrip("/") == "/chat/completions" and body is not None
        agent, sent = proxy.layer.before(body) if chat else (UNATTRIBUTED, body)
        url = proxy.upstream.rstrip("/") + route
        headers = {
            "Authorization": f"Bearer {proxy.upstream_key}",
            "Content-Type": "application/json",
            AGENT_HEADER: agent,
        }
        try:
            response = proxy.client.request(
                self.command, url, json=sent if self.command == "POST" else None, headers=headers
            )
        except httpx.HTTPError as exc:
            message = f"the model gateway at {proxy.upstream} did not answer: {type(exc).__name__}: {exc}"
            payload = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
            if chat:
                proxy.layer.after(agent, path, sent, 502, {"error": message})
            return self._send(502, "application/json", payload)
        content_type = response.headers.get("content-type", "application/json")
        if chat:
            reply = _sse_chunks(response.content) if "event-stream" in content_type else _json_or_text(response)
            proxy.layer.after(agent, path, sent, response.status_code, reply)
        self._send(response.status_code, content_type, response.content)

    def _send(self, status: int, content_type: str, payload: bytes):
        send_reply(self, status, content_type, payload)


def _json_or_text(response: httpx.Response):
    try:
        return response.json()
    except ValueError:
        return response.text[:2000]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner):
        self.owner = owner
        super().__init__((owner.host, owner.port), _Handler)


class FaultProxy:
    """`with FaultProxy(gateway_url, gateway_key, layer) as proxy:` serves `proxy.base_url` on 127.0.0.1.
    `timeout` must outlast the gateway's whole budget for one call (`CallPolicy.client_timeout`)."""

    def __init__(
        self,
        upstream: str,
        upstream_key: str,
        layer: FaultLayer,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 120.0,
    ):
        self.upstream, self.upstream_key, self.layer = upstream, upstream_key, layer
        self.host, self.port = host, port
        self.client = httpx.Client(timeout=timeout, trust_env=False)  # the gateway is on loopback: never via a proxy
        self._httpd = self._thread = None

    def __enter__(self) -> "FaultProxy":
        self._httpd = _Server(self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fault-proxy:{self.port}",
        )
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self.client.close()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"
