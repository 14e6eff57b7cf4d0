"""What one model exchange is on the wire, as pure functions: its key, its usage, its stream.

The replay key is the SHA-256 of the canonical request (method, route, JSON body with sorted keys).
No field is normalized away: the pinned frameworks were measured to send byte-identical requests for
the same cell (no volatile ids or times in any body), so the content alone identifies a call. Within
one run, identical requests are answered in the order they were recorded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from adapters.scripted.wire import redact_headers, route_of

__all__ = [
    "request_key",
    "usage_of",
    "parse_sse",
    "render_sse",
    "strip_usage_chunks",
    "redact_headers",
    "route_of",
    "with_completion_limit",
]


def request_key(method: str, path: str, body: Any) -> str:
    canonical = json.dumps(
        {"method": method.upper(), "route": route_of(path), "body": body},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_sse(raw: bytes) -> list[dict] | None:
    """The JSON data objects of an SSE body ([DONE] dropped); None when it is not a JSON event stream."""
    chunks = []
    for block in raw.decode("utf-8", errors="replace").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if not data or data.strip() == "[DONE]":
            continue
        try:
            chunks.append(json.loads(data))
        except ValueError:
            return None
    return chunks


def render_sse(chunks: list[dict]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode("utf-8") for c in chunks) + b"data: [DONE]\n\n"


def strip_usage_chunks(chunks: list[dict]) -> list[dict]:
    """Drop the usage-only chunk (no choices) that the gateway asked for on the client's behalf."""
    return [c for c in chunks if not (c.get("usage") and not c.get("choices"))]


def usage_of(reply: Any) -> dict | None:
    """The usage a reply reports (JSON body or SSE chunks), flattened; None when it reports none."""
    reported = None
    if isinstance(reply, dict):
        reported = reply.get("usage")
    elif isinstance(reply, list):
        for chunk in reply:
            if isinstance(chunk, dict) and chunk.get("usage"):
                reported = chunk["usage"]  # the last one wins: it is the final tally
    if not isinstance(reported, dict):
        return None
    prompt_details = reported.get("prompt_tokens_details") or {}
    completion_details = reported.get("completion_tokens_details") or {}
    return {
        "prompt_tokens": int(reported.get("prompt_tokens") or 0),
        "completion_tokens": int(reported.get("completion_tokens") or 0),
        "cached_tokens": int(prompt_details.get("cached_tokens") or 0),
        "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0),
    }


def served_model(reply: Any) -> str | None:
    if isinstance(reply, dict):
        return reply.get("model") if isinstance(reply.get("model"), str) else None
    if isinstance(reply, list):
        for chunk in reply:
            if isinstance(chunk, dict) and isinstance(chunk.get("model"), str):
                return chunk["model"]
    return None


def estimate_tokens(body: Any) -> int:
    """What a call will draw from a token bucket before it is made: its prompt (about 4 characters a
    token) plus whatever completion it caps itself at."""
    if not isinstance(body, dict):
        return 1
    prompt = len(json.dumps(body.get("messages", []))) // 4 + 1
    cap = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return prompt + (int(cap) if isinstance(cap, int) else 0)


def with_completion_limit(body: Any, limit: int | None) -> tuple[Any, int | None]:
    """(the body to send, the completion limit it carries): the registered per-call limit sent as
    `max_tokens` on every generation call, so a model that never stops ends there. A client's own
    smaller limit stands; a client that sends `max_completion_tokens` has that field capped instead
    (providers refuse both at once)."""
    if limit is None or not isinstance(body, dict) or not ("messages" in body or "prompt" in body):
        return body, None
    field = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    asked = body.get(field)
    if isinstance(asked, int) and not isinstance(asked, bool) and 0 < asked <= limit:
        return body, asked
    return {**body, field: limit}, limit


def prompt_token_bound(body: Any) -> int:
    """An upper bound on a request's prompt tokens, counted before it is sent: its UTF-8 length as JSON
    (messages, tools and their framing). A byte-level BPE token covers at least one byte of the text
    it encodes, so no tokenizer counts more; no vocabulary file is needed (none can be fetched here)."""
    return len(json.dumps(body, ensure_ascii=False).encode()) if isinstance(body, dict) else 1


def completion_cap(body: Any) -> int | None:
    """The completion tokens a request caps itself at, if it does."""
    cap = body.get("max_completion_tokens") or body.get("max_tokens") if isinstance(body, dict) else None
    return cap if isinstance(cap, int) and cap > 0 else None
