"""openai's client state every run would otherwise build on first use, built once in a fork server.

openai defers each response model's pydantic schema to its first use (`DEFER_PYDANTIC_BUILD`) and
resolves its request-body type hints on first use: ~27 ms of CPU a run (measured). Both the
harness's fork server (adapters/fork_ready.py) and the confined one (adapters/confined_server.py)
build them before forking.
"""

from openai._models import construct_type
from openai._utils import maybe_transform
from openai.types.chat import ChatCompletion, ChatCompletionChunk, completion_create_params

from adapters.scripted.reply import Reply, ToolCall
from adapters.scripted.wire import completion_body, stream_chunks  # the replies' shapes, not the model

# The client modules a run's process would otherwise import itself (~0.8 s a run, measured with cProfile).
CLIENT_MODULES = ("openai.resources", "httpcore", "anyio._backends._asyncio")


def build_response_models() -> None:
    """Parse one reply with a tool call, whole and streamed, as every run's clients will."""
    reply = Reply("warm", (ToolCall("warm", "{}"),))
    construct_type(type_=ChatCompletion, value=completion_body(0, "warm", {"messages": []}, reply))
    for chunk in stream_chunks(0, "warm", {"messages": []}, reply):
        construct_type(type_=ChatCompletionChunk, value=chunk)


def resolve_request_types() -> None:
    """Transform one request body of each message role, whole and streamed, as openai's create does."""
    call = {"id": "call_0", "type": "function", "function": {"name": "warm", "arguments": "{}"}}
    body = {
        "model": "warm",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": "t"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "warm", "description": "d", "parameters": {"type": "object"}}}
        ],
        "tool_choice": "auto",
        "stream_options": {"include_usage": True},
    }
    maybe_transform({**body, "stream": True}, completion_create_params.CompletionCreateParamsStreaming)
    maybe_transform(body, completion_create_params.CompletionCreateParamsNonStreaming)
