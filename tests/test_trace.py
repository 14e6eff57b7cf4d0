"""Every reference run file imports losslessly: parse, then write back, gives the same object."""

import json

import pytest

from sabot.recorder import Recorder
from sabot.trace import EventKind, TraceError, parse_runresult, to_runresult
from tests.conftest import CORPUS, require_corpus


def test_every_reference_run_round_trips():
    require_corpus()
    files = sorted((CORPUS / "harness" / "runs").rglob("*runresult.json"))
    assert len(files) == 189
    for path in files:
        obj = json.loads(path.read_text())
        assert to_runresult(parse_runresult(obj, str(path))) == obj, path


def test_fields_beyond_the_reference_schema_are_kept():
    obj = {
        "error": None,
        "injection_seq": None,
        "injection_verified": False,
        "task_passed": True,
        "exchanges": [{"request": {"model": "gpt-5.6-terra"}, "reply": {"id": "x"}}],
        "trace": {
            "config": "default",
            "events": [],
            "framework": "langgraph",
            "operator": None,
            "run_id": "b",
            "schema_version": 1,
            "seed": 11,
            "task": "T1",
            "served_models": ["gpt-5.6-terra"],
        },
    }
    record = parse_runresult(obj, "live.json")
    assert record.extra["exchanges"] and record.extra["trace"]["served_models"]
    assert to_runresult(record) == obj


def test_a_boolean_is_not_a_seq():
    obj = {
        "error": None,
        "injection_seq": True,
        "injection_verified": False,
        "task_passed": True,
        "trace": {
            "config": "d",
            "events": [],
            "framework": "f",
            "operator": None,
            "run_id": "r",
            "schema_version": 1,
            "seed": 11,
            "task": "T1",
        },
    }
    with pytest.raises(TraceError, match="x.json: injection_seq: expected int or NoneType, got bool"):
        parse_runresult(obj, "x.json")


def test_event_kinds_are_the_reference_strings():
    require_corpus()
    kinds = {
        e["kind"]
        for path in (CORPUS / "harness" / "runs").rglob("*runresult.json")
        for e in json.loads(path.read_text())["trace"]["events"]
    }
    assert kinds <= set(EventKind) and EventKind.GUARDRAIL_EVENT == "guardrail-event"
    recorder = Recorder()
    recorder.record("worker", EventKind.AGENT_MSG, text="hi")
    assert type(recorder.events[0].kind) is str and recorder.events[0].kind == "agent-msg"  # stored as it always was
    with pytest.raises(ValueError, match="guardrail_event"):
        recorder.record("critic", "guardrail_event", act="reject")  # a misspelt kind is refused where it is recorded
