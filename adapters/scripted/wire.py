"""The scripted server's wire format: pure functions from a Reply and its request to the JSON bodies
and SSE chunks OpenAI clients expect, and the request side as recorded (headers with credentials
masked, the normalised route). Apart from the HTTP layer (adapters/scripted/server.py) so the gateway
and the warm-up clients can use the same shapes without a server."""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

from adapters.scripted.reply import Reply

REDACTED_HEADERS = ("authorization", "proxy-authorization", "api-key", "x-api-key", "cookie")
STREAM_PIECES = 4  # content is split into about this many deltas, like a real stream
ARG_PIECES = 3  # tool-call arguments likewise arrive in several continuation deltas

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def estimate_tokens(text: str) -> int:
    """A cheap deterministic token estimate; the scripted runs need stable numbers, not exact ones."""
    return len(text) // 4 + 1


def usage_for(request: dict, reply: Reply) -> dict:
    prompt = estimate_tokens(json.dumps(request.get("messages", []), sort_keys=True))
    spoken = (reply.content or "") + "".join(c.name + c.arguments for c in reply.tool_calls)
    completion = estimate_tokens(spoken)
    # Reported in the provider's shape; the scripted model caches nothing and does no hidden reasoning.
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def error_body(status: int, message: str) -> dict:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def tool_call_id(n: int, i: int) -> str:
    return f"call_{n}_{i}"


def completion_body(n: int, model: str, request: dict, reply: Reply) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": tool_call_id(n, i), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply), "logprobs": None}],
        "usage": usage_for(request, reply),
    }


def split_text(text: str, pieces: int) -> list[str]:
    """Split text into at most `pieces` non-empty parts (none for empty text)."""
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_deltas(n: int, reply: Reply) -> Iterator[dict]:
    """The deltas of a streamed answer, in the order OpenAI sends them."""
    yield {"role": "assistant", "content": ""}
    for piece in split_text(reply.content or "", STREAM_PIECES):
        yield {"content": piece}
    for i, call in enumerate(reply.tool_calls):
        opening = {
            "index": i,
            "id": tool_call_id(n, i),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield {"tool_calls": [opening]}
        for part in split_text(call.arguments, ARG_PIECES):
            yield {"tool_calls": [{"index": i, "function": {"arguments": part}}]}


def stream_chunks(n: int, model: str, request: dict, reply: Reply) -> list[dict]:
    """Every SSE data object of a streamed completion ([DONE] is added by the writer)."""
    created = int(time.time())

    def chunk(choices: list[dict]) -> dict:
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
        }

    chunks = [chunk([{"index": 0, "delta": d, "finish_reason": None}]) for d in stream_deltas(n, reply)]
    chunks.append(chunk([{"index": 0, "delta": {}, "finish_reason": finish_reason(reply)}]))
    if (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**chunk([]), "usage": usage_for(request, reply)})
    return chunks


def redact_headers(headers) -> dict[str, str]:
    """Request headers with credentials masked: the API key must never be stored."""
    recorded = {}
    for name, value in headers.items():
        key = name.lower()
        if key in REDACTED_HEADERS:
            scheme = value.split(" ", 1)[0] if " " in value else ""
            value = f"{scheme} ***".strip()
        recorded[key] = value
    return recorded


def route_of(path: str) -> str:
    """Normalise a request path: drop the query, a trailing slash and the optional /v1 prefix."""
    route = path.split("?", 1)[0].rstrip("/") or "/"
    if route == "/v1" or route.startswith("/v1/"):
        route = route[len("/v1") :] or "/"
    return route
