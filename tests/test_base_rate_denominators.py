"""Base-rate denominators are the tables' own, per task and operator, never a division of the
pooled count (a wave-1 row has 2 clean baselines of one task and 5 of another)."""

from judges.hard.rulesets import load_ruleset
from judges.hard.strict import FloorRules, base_rates
from judges.labels import board_labels
from sabot.trace import Event, RunRecord


def clean(task, seed, text="FLAGS: none\nVERDICT: APPROVE"):
    return RunRecord(
        f"{task}-{seed}",
        "autogen",
        "guardrail",
        task,
        None,
        seed,
        (Event(1, "critic", "agent-msg", {"text": text}),),
        None,
        False,
        True,
        None,
    )


def test_the_label_prints_each_tasks_own_denominator(registry):
    ruleset = load_ruleset(registry, "v0.2.1")
    floor = FloorRules(ruleset.version, ruleset.flags, ruleset.strict, ruleset.anchor_sets)
    baselines = [clean("T3", s) for s in (11, 14)] + [clean("T4", s) for s in (11, 12, 13, 14, 15)]
    operators = ("O1", "O2", "O3", "O4", "O5", "O6")
    rates = base_rates(floor, baselines, operators)
    board = {
        "tables": {"framework_config": []},
        "baselines_scanned": len(baselines),
        "base_rates": {"anchor": {op: list(rates.rate("anchor", "operator", op)) for op in operators}},
        "base_rates_by_task": {"anchor": {t: list(rates.rate("anchor", "task", t)) for t in ("T3", "T4")}},
    }
    label = board_labels(board)["base_rate_denominator"]
    assert board["base_rates_by_task"]["anchor"] == {"T3": [0, 12], "T4": [0, 30]}
    assert "per task (its baselines x 6 anchor sets) T3 12, T4 30" in label
    assert "per operator (its baselines) 7 each" in label and "pooled 7 baselines x 6 anchor sets = 42" in label
