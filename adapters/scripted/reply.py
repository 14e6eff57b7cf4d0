"""What a responder answers the scripted model server: one `Reply` per request, text and/or tool
calls, or an error status. Responders (`adapters.scripted.policy`, the team runner's scripted
stand-ins) depend on this, not on the HTTP server that turns it into the OpenAI wire format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # a JSON string, passed through verbatim


@dataclass(frozen=True)
class Reply:
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    model: str | None = None  # the model id reported as serving the call; default: the request's "model"
    status: int = 200  # non-200 -> an OpenAI-style error body
    error: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers (e.g. Retry-After on a 429)
    body: bytes | None = None  # a non-200 body sent as these exact bytes (a provider escaping its JSON its own way)


Responder = Callable[[dict], Reply]  # receives the parsed request body (plus "path")
