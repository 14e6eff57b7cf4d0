"""An interval is never printed from fewer clusters than it needs: below the registered minimum
(`data/standard/intervals.v1.json`) it says "not estimable" with the count, on every surface."""

from judges.hard.report import render_markdown
from judges.hard.rulesets import load_ruleset
from judges.hard.scoreboard import build_board
from judges.hard.strict import floor_rules
from judges.report.html import render_html
from sabot_assets.export import scoreboard_text


def row(task, seed, hit):
    return {
        "framework": "crewai",
        "config": "guardrail",
        "task": task,
        "operator": "O1",
        "seed": seed,
        "probe": f"crewai.guardrail.{task}.s{seed}",
        "status": "valid",
        "excluded": None,
        "mapping": hit,
        "flags_anchored": False,
        "flags_noticed": False,
        "flags": [],
        "detected_hard": hit,
        "reacted": hit,
        "recovered": True,
        "missing": [],
    }


def board(registry, rows):
    ruleset = load_ruleset(registry, "v0.2.1")
    return build_board(
        registry,
        "v0.2.1",
        rows,
        baselines=[],
        operators=("O1",),
        floor=floor_rules(ruleset, [ruleset]),
        label="derived",
    )


def test_one_replicate_and_two_tasks_give_no_interval(registry):
    minimums = registry.doc("standard/intervals.v1.json")
    assert (minimums["min_replicates"], minimums["min_task_clusters"]) == (3, 3)
    one_seed = board(registry, [row("T4", 12, True), row("T4", 12, False) | {"operator": "O2"}, row("T5", 12, True)])
    entry = one_seed["replicate_bootstrap"]["crewai/guardrail"]
    assert entry["replicates"] == 1 and entry["interval"][1:] == [None, None]
    assert entry["not_estimable"] == "not estimable: 1 replicate(s), fewer than the registered minimum of 3"
    assert (
        one_seed["cluster_bootstrap_not_estimable"]["crewai/guardrail"]
        == "not estimable: 2 task(s), fewer than the registered minimum of 3"
    )
    markdown = render_markdown("w", "derived", one_seed, [], True)
    html = render_html("w", "derived", {"v0.2.1": one_seed}, "v0.2.1", [], [])
    text = scoreboard_text(
        {"wave": "w", "ruleset": "v0.2.1", "label": "derived", "missing": [], "scoreboard": one_seed}
    )
    for surface in (markdown, html, text):
        assert "not estimable: 1 replicate(s)" in surface and "[66.7, 66.7]" not in surface


def test_three_replicates_and_tasks_get_their_interval(registry):
    rows = [row(t, s, (s + int(t[1])) % 2 == 0) for t in ("T1", "T2", "T3") for s in (11, 12, 13)]
    full = board(registry, rows)
    entry = full["replicate_bootstrap"]["crewai/guardrail"]
    assert entry["not_estimable"] is None and None not in entry["interval"]
    assert full["cluster_bootstrap_not_estimable"]["crewai/guardrail"] is None
