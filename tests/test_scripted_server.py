"""The scripted OpenAI-compatible server, exercised by the real clients over HTTP on 127.0.0.1."""

import asyncio
import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from adapters.scripted import Reply, ScriptedModelServer, ToolCall

KEY = "sk-test"
ANSWER = "The scripted model answers in several streamed pieces."
WEATHER_ARGS = json.dumps({"city": "Paris", "unit": "celsius"})
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def scripted(request: dict) -> Reply:
    """A small policy: call the tool when offered, answer after a tool result, JSON when asked."""
    messages = request.get("messages", [])
    last_role = messages[-1].get("role") if messages else None
    if request.get("tools") and last_role != "tool":
        return Reply(tool_calls=(ToolCall("get_weather", WEATHER_ARGS),))
    if last_role == "tool":
        return Reply(content=f"It is {messages[-1]['content']}.")
    if request.get("response_format"):
        return Reply(content='{"city": "Paris", "temperature": 21}')
    return Reply(content=ANSWER)


@pytest.fixture(autouse=True)
def local_only_env(monkeypatch):
    # The key exists only inside each test; proxies are bypassed so traffic stays on 127.0.0.1.
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with ScriptedModelServer(scripted, models=("gpt-5.6-terra", "gpt-5.6-luna")) as srv:
        yield srv


def sdk(srv: ScriptedModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0, timeout=10)


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def raw_request(srv: ScriptedModelServer, method: str, path: str, body: dict | None = None):
    """(status, headers, body bytes) of one plain HTTP request, bypassing every client library."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(
            method,
            path,
            body=json.dumps(body) if body is not None else None,
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


# -- openai SDK ---------------------------------------------------------------


def test_sdk_completion_round_trip_records_request_and_redacts_key(server):
    completion = sdk(server).chat.completions.create(model="gpt-5.6-terra", messages=user("hello"))

    assert completion.choices[0].message.content == ANSWER
    assert completion.choices[0].finish_reason == "stop"
    assert completion.id == "chatcmpl-1"
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens > 0
    [exchange] = server.exchanges
    assert exchange["n"] == 1 and exchange["path"] == "/v1/chat/completions" and exchange["status"] == 200
    assert exchange["request"] == {"model": "gpt-5.6-terra", "messages": user("hello")}
    assert exchange["reply"]["choices"][0]["message"]["content"] == ANSWER
    assert exchange["headers"]["authorization"] == "Bearer ***"
    assert KEY not in json.dumps(server.exchanges)


def test_sdk_stream_reassembles_content_and_ends_with_usage(server):
    stream = sdk(server).chat.completions.create(
        model="gpt-5.6-terra", messages=user("hello"), stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)

    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 1, "content should arrive as several deltas"
    assert "".join(deltas) == ANSWER
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    recorded = server.exchanges[0]["reply"]
    assert isinstance(recorded, list) and recorded[-1]["usage"] == chunks[-1].usage.model_dump(exclude_none=True)


def test_sdk_tool_call_then_final_answer(server):
    client = sdk(server)
    messages = user("What is the weather in Paris?")
    first = client.chat.completions.create(model="gpt-5.6-terra", messages=messages, tools=[WEATHER_TOOL])

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_1_0",
        "get_weather",
        {"city": "Paris", "unit": "celsius"},
    )

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"},
    ]
    final = client.chat.completions.create(model="gpt-5.6-terra", messages=messages, tools=[WEATHER_TOOL])
    assert final.choices[0].message.content == "It is sunny, 21 C."
    assert server.exchanges[1]["request"]["messages"][-1]["tool_call_id"] == "call_1_0"


def test_sdk_streamed_tool_call_arguments_reassemble(server):
    stream = sdk(server).chat.completions.create(
        model="gpt-5.6-terra", messages=user("weather?"), tools=[WEATHER_TOOL], stream=True
    )
    name, arguments, parts = None, "", 0
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or ():
            name = call.function.name or name
            arguments += call.function.arguments or ""
            parts += bool(call.function.arguments)

    assert name == "get_weather" and arguments == WEATHER_ARGS
    assert parts > 1, "arguments should arrive as continuation deltas"


def test_json_schema_content_passes_through_unchanged(server):
    response_format = {
        "type": "json_schema",
        "json_schema": {
            "name": "X",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "temperature": {"type": "integer"}},
                "required": ["city", "temperature"],
                "additionalProperties": False,
            },
        },
    }
    completion = sdk(server).chat.completions.create(
        model="gpt-5.6-terra", messages=user("weather as JSON"), response_format=response_format
    )

    assert json.loads(completion.choices[0].message.content) == {"city": "Paris", "temperature": 21}
    assert server.exchanges[0]["request"]["response_format"] == response_format


def test_reply_model_overrides_the_requested_model():
    with ScriptedModelServer(lambda request: Reply(content="ok", model="gpt-5.6-luna")) as srv:
        completion = sdk(srv).chat.completions.create(model="gpt-5.6-terra", messages=user("hi"))
        listed = [m.id for m in sdk(srv).models.list()]

    assert completion.model == "gpt-5.6-luna"
    assert srv.exchanges[0]["model"] == "gpt-5.6-luna"
    assert srv.exchanges[0]["request"]["model"] == "gpt-5.6-terra"
    assert listed == ["gpt-5.6-terra", "gpt-5.6-luna"]  # requested and served ids, in order seen


def test_responder_exception_is_a_500_and_the_server_keeps_serving():
    calls = []

    def flaky(request: dict) -> Reply:
        calls.append(request)
        if len(calls) == 1:
            raise ValueError("script ran out of turns")
        return Reply(content="recovered")

    with ScriptedModelServer(flaky) as srv:
        client = sdk(srv)
        with pytest.raises(openai.InternalServerError) as failure:
            client.chat.completions.create(model="gpt-5.6-terra", messages=user("hi"))
        recovered = client.chat.completions.create(model="gpt-5.6-terra", messages=user("again"))

    assert failure.value.status_code == 500
    assert "script ran out of turns" in failure.value.body["message"]
    assert recovered.choices[0].message.content == "recovered"
    assert [e["status"] for e in srv.exchanges] == [500, 200]
    assert calls[0]["path"] == "/v1/chat/completions"  # the responder sees the path too


def test_scripted_rate_limit_status_and_error_body():
    with ScriptedModelServer(lambda request: Reply(status=429, error="slow down")) as srv:
        with pytest.raises(openai.RateLimitError) as failure:
            sdk(srv).chat.completions.create(model="gpt-5.6-terra", messages=user("hi"), stream=True)

    assert failure.value.status_code == 429
    assert failure.value.body == {"message": "slow down", "type": "rate_limit_error", "param": None, "code": None}
    assert srv.exchanges[0]["status"] == 429


def test_raw_stream_is_sse_framed_and_ends_with_done(server):
    request = {"model": "gpt-5.6-terra", "messages": user("hi"), "stream": True}
    status, headers, body = raw_request(server, "POST", "/chat/completions", request)  # no /v1 prefix

    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = body.decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and {c["id"] for c in chunks} == {"chatcmpl-1"}
    assert server.exchanges[0]["reply"] == chunks


def test_unknown_route_is_404_and_models_are_listed(server):
    status, _, body = raw_request(server, "POST", "/v1/embeddings")
    assert status == 404 and "no route" in json.loads(body)["error"]["message"]

    for path in ("/v1/models", "/models"):
        status, _, body = raw_request(server, "GET", path)
        assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["gpt-5.6-terra", "gpt-5.6-luna"]
    assert [(e["path"], e["status"]) for e in server.exchanges] == [
        ("/v1/embeddings", 404),
        ("/v1/models", 200),
        ("/models", 200),
    ]


def test_concurrent_requests_are_all_answered_and_recorded_in_order(server):
    client = sdk(server)

    def ask(i: int) -> str:
        return client.chat.completions.create(model="gpt-5.6-terra", messages=user(f"q{i}")).choices[0].message.content

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, range(16)))

    assert answers == [ANSWER] * 16
    assert [e["n"] for e in server.exchanges] == list(range(1, 17))
    asked = sorted(e["request"]["messages"][0]["content"] for e in server.exchanges)
    assert asked == sorted(f"q{i}" for i in range(16))


def test_stop_frees_the_port_promptly():
    srv = ScriptedModelServer(scripted).start()
    port = srv.port
    assert port != 0 and srv.base_url == f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 10  # bounded: stop() must not hang on the serving thread

    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()


# -- frameworks ----------------------------------------------------------------


def test_langchain_invoke_and_stream(server):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="gpt-5.6-terra", base_url=server.base_url, api_key=KEY, max_retries=0, timeout=10)
    invoked = llm.invoke([("user", "hello")])
    streamed = "".join(chunk.content for chunk in llm.stream([("user", "hello")]))

    assert invoked.content == ANSWER and streamed == ANSWER
    requests = [e["request"] for e in server.exchanges]
    assert [r["stream"] for r in requests] == [False, True]
    # langchain leaves temperature out for gpt-5* models.
    assert all("temperature" not in r for r in requests)
    # With a custom base_url langchain does not ask for stream usage.
    assert "stream_options" not in requests[1]


def test_autogen_async_client_streams_a_tool_call(server):
    from autogen_core.models import ModelInfo, UserMessage
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    def get_weather(city: str, unit: str = "celsius") -> str:
        """Current weather in a city."""
        return "sunny"

    info = ModelInfo(vision=False, function_calling=True, json_output=True, family="unknown", structured_output=True)
    client = OpenAIChatCompletionClient(
        model="gpt-5.6-terra", base_url=server.base_url, api_key=KEY, model_info=info, max_retries=0
    )

    async def run():
        try:
            tool = FunctionTool(get_weather, description="Current weather in a city.")
            stream = client.create_stream([UserMessage(content="weather?", source="user")], tools=[tool])
            return [item async for item in stream][-1]
        finally:
            await client.close()

    result = asyncio.run(run())
    assert result.finish_reason == "function_calls"
    [call] = result.content
    assert (call.id, call.name, call.arguments) == ("call_1_0", "get_weather", WEATHER_ARGS)
    assert server.exchanges[0]["request"]["stream"] is True


# -- seeded latency -------------------------------------------------------------


def test_latency_is_seeded_per_call_and_bounded():
    from adapters.scripted import Latency

    latency = Latency(fixed=1.0, jitter=0.5, seed="cell-a")
    delays = [latency.delay(n) for n in range(1, 20)]
    assert delays == [Latency(1.0, 0.5, "cell-a").delay(n) for n in range(1, 20)]  # reproducible
    assert all(1.0 <= d < 1.5 for d in delays) and len(set(delays)) > 1
    assert delays != [Latency(1.0, 0.5, "cell-b").delay(n) for n in range(1, 20)]  # seeded by the cell
    assert Latency(0.25).delay(7) == 0.25 and Latency().delay(1) == 0.0


def test_latency_from_env_parses_fixed_and_jitter_and_names_bad_input():
    from adapters.scripted import Latency

    assert Latency.from_env("s", {"SABOT_SCRIPTED_LATENCY": "1.0,0.2"}) == Latency(1.0, 0.2, "s")
    assert Latency.from_env("s", {"SABOT_SCRIPTED_LATENCY": "0.5"}) == Latency(0.5, 0.0, "s")
    assert Latency.from_env("s", {}) == Latency(seed="s")
    for bad in ("fast", "1,2,3", "-1"):
        with pytest.raises(ValueError, match="SABOT_SCRIPTED_LATENCY|>= 0"):
            Latency.from_env("s", {"SABOT_SCRIPTED_LATENCY": bad})


def test_a_slow_server_answers_after_its_latency_and_concurrent_calls_overlap():
    from adapters.scripted import Latency

    with ScriptedModelServer(scripted, latency=Latency(fixed=0.5)) as slow:
        client = sdk(slow)
        started = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(lambda i: client.chat.completions.create(model="m", messages=user(f"q{i}")), range(4))
            )
        elapsed = time.perf_counter() - started
    assert [a.choices[0].message.content for a in answers] == [ANSWER] * 4
    assert elapsed >= 0.5  # every call waited its latency
    assert elapsed < 4 * 0.5  # in parallel, not one after another (the requests' own threads)
