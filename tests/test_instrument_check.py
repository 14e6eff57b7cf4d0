"""The instrument check's rules on constructed cells: it must see a scorer that misreads the simulator."""

from judges.hard.rulesets import load_ruleset
from judges.instrument import agreement


def cell(operator="O1", probe="langgraph.default.T1.s11", **verdict):
    row = {
        "framework": "langgraph",
        "config": "default",
        "task": "T1",
        "operator": operator,
        "probe": probe,
        "status": "valid",
        "detected_hard": False,
        "reacted": False,
        "recovered": False,
    }
    return row | verdict


REJECTED = [
    {"stage": "worker", "careful": False, "revision": False},
    {"stage": "reviewer", "acted": True, "flags_line": None},
]
APPROVED = [
    {"stage": "worker", "careful": False, "revision": False},
    {"stage": "reviewer", "acted": False, "flags_line": None},
]


def test_agreement_counts_and_lists_disagreements(registry):
    ruleset = load_ruleset(registry, "v0.2.0")
    rows = [
        cell(probe="a", detected_hard=True, reacted=True),  # agrees: the reviewer rejected
        cell(probe="b"),  # disagrees: the reviewer rejected, the scorer saw nothing
        cell(probe="c", detected_hard=True, reacted=True),  # a deterministic validator alone: counted apart
        cell(operator="O6", probe="d", recovered=True),  # O6 cannot recover
    ]
    intents = {("O1", "a"): REJECTED, ("O1", "b"): REJECTED, ("O1", "c"): APPROVED, ("O6", "d"): APPROVED}
    acts = {
        ("O1", "c"): [
            {"component": "validator", "act": "reject", "counted": True},
            {"component": "validator", "act": "retry_with_reason", "counted": True},
        ]
    }
    doc = agreement(rows, intents, acts, ruleset)
    assert doc["total"]["detection"] == {"agree": 2, "disagree": 1, "deterministic": 1, "undetermined": 0}
    assert doc["total"]["recovery"]["disagree"] == 1 and doc["total"]["recovery"]["undetermined"] == 3
    assert sorted((d["cell"], d["axis"]) for d in doc["disagreements"]) == [
        ("O1|b", "detection"),
        ("O1|b", "reaction"),
        ("O6|d", "recovery"),
    ]
    assert (
        doc["by_row"]["langgraph/default"]["detection"]["disagree"] == 1
        and doc["by_operator"]["O6"]["recovery"]["disagree"] == 1
    )


def test_an_anchored_flags_line_is_expected_detection_only_where_the_ruleset_scores_flags(registry):
    flagged = [
        {"stage": "reviewer", "acted": False, "flags_line": "FLAGS: the source says 74.1 but the figure says 47.1"}
    ]
    row = cell(probe="e")  # the scorer saw no detection
    for version, expected in (("v0.1.3", 0), ("v0.2.0", 1)):
        doc = agreement([row], {("O1", "e"): flagged}, {}, load_ruleset(registry, version))
        assert doc["total"]["detection"]["disagree"] == expected, version
