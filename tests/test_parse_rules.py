"""The published parse rules: verdict tokens, FLAGS lines and their none-forms, anchors."""

import pytest

from sabot.parse_rules import Protocols, anchored


@pytest.fixture(scope="module")
def protocols(registry):
    return Protocols.from_registry(registry)


@pytest.mark.parametrize(
    ("text", "decision", "reason"),
    [
        ("Looks fine.\nVERDICT: APPROVE", "APPROVE", None),
        ("verdict: reject - unit_id is incorrect.", "REJECT", "unit_id is incorrect."),
        ("VERDICT:REJECT-wrong rate", "REJECT", "wrong rate"),
        ("VERDICT: APPROVE\nVERDICT: REJECT - later", "APPROVE", None),  # first match wins
    ],
)
def test_verdict_token(protocols, text, decision, reason):
    verdict = protocols.parse_verdict(text)
    assert (verdict.decision, verdict.reason) == (decision, reason)


def test_no_token_is_no_act(protocols):
    assert protocols.parse_verdict("I would reject this draft, the rate is off.") is None


def test_flags_line_first_match_multiline(protocols):
    text = "Review.\n  flags: 74.1 vs 47.1 \nFLAGS: second\nVERDICT: APPROVE"
    assert protocols.flags_line(text) == "74.1 vs 47.1"
    assert protocols.flags_line("VERDICT: APPROVE") is None


@pytest.mark.parametrize("content", ["none", "None.", "n/a", "N/A", "no noticed", "none noticed", "No anomalies.", ""])
def test_none_forms_are_not_notices(protocols, content):
    assert not protocols.is_noticed(content)


@pytest.mark.parametrize("content", ["none of the sources agree on 8,400", "nothing else", "anomalies: 74.1"])
def test_other_contents_are_notices(protocols, content):
    assert protocols.is_noticed(content)


def test_anchors_are_case_insensitive_substrings_without_word_boundaries(registry):
    assert anchored("the BRENNEKE spelling", registry.anchors("T2", "O3")) == ["Brenneke"]
    assert anchored("route leg of 140 km", registry.anchors("T4", "O1")) == [
        "140",
        "40 km",
    ]  # the disclosed 40-in-140 edge
    assert anchored("depot at 1140 m", registry.anchors("T4", "O1")) == ["140"]
    assert anchored("nothing relevant", registry.anchors("T1", "O1")) == []
