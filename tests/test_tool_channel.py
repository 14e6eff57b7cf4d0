"""A team pipeline's process is never handed the run's fault; its wrapped tools ask the harness.

The operator, its spec and its ground truth stay in the harness (adapters/byo/seams.py, answered over
adapters/byo/tool_channel.py): a hostile pipeline that searches its own process for them finds nothing,
the tool fault still lands, and what the fault did and which tools were called are the harness's record,
so a pipeline cannot report a landed fault as not landed (an exclusion instead of a miss).
"""

import json
import shutil
from pathlib import Path

import httpx
import pytest

from adapters.byo.proxy import FaultLayer, FaultProxy
from adapters.byo.confined_work import StampedRecorder
from adapters.byo.runner import run_project
from adapters.byo.seams import SeamFault
from adapters.byo.tool_channel import RESULT_PATH, ToolChannel
from adapters.runner import RunSpec
from sabot.projects import Project

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "http://127.0.0.1:9/v1"  # the gateway behind the proxy: the tool channel never reaches it
LOOKUP = {"seam": "tool", "tool": "lookup", "find": "84.0", "replace": "48.0", "ground_truth": "paid 84.0"}

# Appended to a copy of the refund_desk example: while the run is under way, the pipeline looks in its
# own process for what would tell it which fault is planted, and leaves what it found in its cwd.
SEARCHING_FACTORY = """

_plain_lookup_order = lookup_order.func


def _search_for_the_fault():
    import gc
    import sys

    found = []
    for obj in gc.get_objects():
        kind = type(obj).__name__
        if kind in ("SeamFault", "FaultLayer"):
            found.append(f"a {kind} object")
        elif isinstance(obj, dict) and "ground_truth" in obj:
            found.append(f"a fault spec: {sorted(obj)}")
    for frame in sys._current_frames().values():
        while frame is not None:
            for name in ("operator", "spec", "fault"):
                if frame.f_locals.get(name) is not None:
                    found.append(f"{name} in {frame.f_code.co_name}: {frame.f_locals[name]!r}"[:200])
            frame = frame.f_back
    Path("fault_search.json").write_text(json.dumps(found))


def _searching_lookup_order(order_id: str) -> str:
    _search_for_the_fault()
    return _plain_lookup_order(order_id)


lookup_order.func = _searching_lookup_order
"""


@pytest.fixture
def channel():
    recorder = StampedRecorder()
    fault = SeamFault("O1", LOOKUP, recorder)
    with FaultProxy(NOWHERE, "unused", FaultLayer({}, fault, recorder)) as proxy:
        yield ToolChannel(proxy.base_url), fault, recorder, proxy


def test_the_harness_answers_a_wrapped_tools_questions_and_keeps_the_record(channel):
    client, fault, recorder, _ = channel
    assert client.claim("drafter", "lookup", {"order_id": "A-1"}) is None
    assert client.result("drafter", "lookup", {"order_id": "A-1"}, '{"amount_paid": 84.0}') == '{"amount_paid": 48.0}'
    answer = {"rows": [84.0]}  # a result that is not text is never perturbed and comes back as the same object
    assert client.result("drafter", "other", {}, answer) is answer
    assert fault.landed and fault.acted == 1 and fault.tools_seen == {"lookup", "other"}
    calls = [(e.agent, e.payload["tool"], e.payload["injected"]) for e in recorder.events]
    assert calls == [("drafter", "lookup", True), ("drafter", "other", False)]


def test_a_malformed_channel_request_is_refused_naming_the_shape(channel):
    _, fault, _, proxy = channel
    origin = proxy.base_url.removesuffix("/v1")
    reply = httpx.post(origin + RESULT_PATH, json={"agent": "drafter", "tool": 7}, trust_env=False)
    assert reply.status_code == 400 and '"tool": text' in reply.json()["error"]["message"]
    reply = httpx.post(origin + RESULT_PATH, json={"agent": "a", "tool": "lookup", "text": 3}, trust_env=False)
    assert reply.status_code == 400 and "'text'" in reply.json()["error"]["message"]
    assert not fault.landed and fault.attempts == 0


def test_a_pipeline_searching_its_own_process_finds_no_fault_and_the_fault_still_lands(tmp_path, monkeypatch):
    for name in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # offline: the project's own test double answers
    copy = tmp_path / "refund_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "refund_desk.py").open("a") as factory:
        factory.write(SEARCHING_FACTORY)
    runs = tmp_path / "runs"
    outcome = run_project(RunSpec("refund_desk", 1, "langgraph", "own", "refund", "O1", 1), Project.load(copy), runs)
    record = outcome.record
    assert record.error is None, record.error
    searches = sorted(runs.rglob("fault_search.json"))
    assert searches, "the pipeline never called lookup_order"
    for search in searches:
        assert json.loads(search.read_text()) == [], search  # nothing of the fault in the pipeline's process
    assert record.injection_verified and record.extra["injection"]["landed"], record.extra["injection"]
    assert "lookup_order" in record.extra["injection"]["tools_wrapped"]
    assert any(e.payload.get("injected") and e.payload.get("operator") == "O1" for e in record.events)
