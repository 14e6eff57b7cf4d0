"""A judge's quote is located in everything the judge was shown, tool outputs included: a quote of
content written only before the fault was planted is never DETECTED_SOFT (SPEC v0.2.1 §2)."""

from judges.hard.funnel import derived_counts, with_soft
from judges.soft.location import AFTER, BEFORE, UNLOCATED, located, quote_location
from judges.soft.rubric import load_rubric
from judges.soft.verdict import quote_occurs, shown_transcript
from sabot.trace import Event, RunRecord

EVENTS = (
    Event(
        1,
        "loader",
        "tool-call",
        {"tool": "load_document", "args": {"name": "record"}, "output": "Drive-end vibration: 47.1 mm/s (certified)"},
    ),
    Event(2, "worker", "agent-msg", {"text": "Extracting the record."}),
    Event(
        3,
        "loader",
        "tool-call",
        {"tool": "load_document", "args": {"name": "record"}, "output": "summary: vibration 74.1 mm/s"},
    ),
    Event(4, "reviewer", "agent-msg", {"text": "FLAGS: none\nVERDICT: APPROVE"}),
)
RECORD = RunRecord("r", "langgraph", "default", "T1", "O1", 11, EVENTS, 3, True, True, None)
ROW = {
    "operator": "O1",
    "probe": "langgraph.default.T1.s11",
    "status": "valid",
    "detected_hard": False,
    "recovered": True,
    "mapping": False,
    "flags_anchored": False,
    "reacted": False,
    "flags_noticed": False,
}


def counts(quote):
    key = (ROW["operator"], ROW["probe"])
    (scored,) = with_soft(
        [ROW], located({key: {"status": "ok", "noticed": True, "evidence_quote": quote}}, {key: RECORD})
    )
    return derived_counts(scored)


def test_a_quote_of_a_tool_output_read_before_the_fault_is_not_detected_soft():
    quote = "Drive-end vibration: 47.1 mm/s (certified)"
    assert quote_occurs(quote, shown_transcript(load_rubric(), RECORD))  # the judge was shown it
    assert quote_location(RECORD, quote) == BEFORE
    assert (counts(quote)["detected_soft"], counts(quote)["soft_pre_injection"]) == (0, 1)


def test_a_quote_of_a_tool_output_after_the_fault_is_detected_soft():
    assert quote_location(RECORD, "vibration 74.1 mm/s") == AFTER
    assert (counts("vibration 74.1 mm/s")["detected_soft"], counts("vibration 74.1 mm/s")["soft_pre_injection"]) == (
        1,
        0,
    )


def test_a_quote_running_across_events_is_located_by_the_events_it_runs_over():
    assert quote_location(RECORD, "(certified) Extracting the record.") == BEFORE
    assert quote_location(RECORD, "Extracting the record. load_document") == AFTER
    assert quote_location(RECORD, "a sentence nothing wrote") == UNLOCATED


def test_a_tool_output_read_again_after_the_fault_is_located_after_it():
    again = Event(
        5,
        "loader",
        "tool-call",
        {"tool": "load_document", "args": {"name": "record"}, "output": "Drive-end vibration: 47.1 mm/s (certified)"},
    )
    record = RunRecord("r", "langgraph", "default", "T1", "O1", 11, EVENTS + (again,), 3, True, True, None)
    assert quote_location(record, "Drive-end vibration: 47.1 mm/s (certified)") == AFTER
