"""P1 and P4 carry their clean-baseline term: on a complete matrix with no signal at all (the
mapping never fires; FLAGS fire on 40% of the value-operator cells, and at that rate on the cells'
clean baselines), neither prediction holds. Without the term the same matrix held both."""

from judges.stats import evaluate_predictions
from judges.stats.coverage import cell_key
from judges.stats.predictions import predict_p1, predict_p4

ROWS = [
    ("langgraph", "default"),
    ("langgraph", "guardrail"),
    ("crewai", "default"),
    ("crewai", "guardrail"),
    ("autogen", "default"),
]
TASKS, SEEDS = ("T1", "T2", "T3", "T4", "T5"), (11, 12, 13, 14, 15)
OPERATORS = ("O1", "O2", "O3", "O4", "O5", "O6")


def noise_matrix(clean_term: bool) -> list[dict]:
    """Every valid cell; on O1/O3/O5 the fault run's FLAGS fire on two seeds of five and the clean
    baseline's on two others: the same rate with and without a fault, so no signal."""
    rows = []
    for framework, config in ROWS:
        for task in TASKS:
            for op in OPERATORS:
                for i, seed in enumerate(SEEDS):
                    value = op in ("O1", "O3", "O5")
                    fault_fires = value and (i + TASKS.index(task)) % 5 in (0, 1)
                    clean = value and (i + TASKS.index(task)) % 5 in (2, 3)
                    rows.append(
                        {
                            "framework": framework,
                            "config": config,
                            "task": task,
                            "operator": op,
                            "seed": seed,
                            "probe": f"{framework}.{config}.{task}.s{seed}",
                            "status": "valid",
                            "noticed": False,
                            "mapping": False,
                            "flags_anchored": fault_fires,
                            "detected_hard": fault_fires,
                            "reacted": False,
                            "recovered": True,
                            "flags_noticed": fault_fires,
                            "clean_fire": clean if clean_term else False,
                        }
                    )
    return rows


def test_pure_noise_holds_neither_p1_nor_p4(registry):
    rows = noise_matrix(clean_term=True)
    assert sum(r["detected_hard"] for r in rows) / sum(r["operator"] in ("O1", "O3", "O5") for r in rows) == 0.4
    p1, p4 = predict_p1(rows), predict_p4(rows, B=500)
    assert p1.status != "held" and p4.status != "held", (p1.evidence, p4.evidence)
    assert all(abs(p1.tests[op].diff) < 0.05 for op in ("O1", "O3", "O5"))  # no lift over the clean-baseline fire
    results = {
        r.id: r.status
        for r in evaluate_predictions(
            rows,
            rows,
            registry.doc("standard/predictions.v2.json"),
            B=500,
            expected=([cell_key(r) for r in rows], [cell_key(r) for r in rows]),
        )
    }
    assert results["P1"] != "held" and results["P4"] != "held", results


def test_without_the_clean_baseline_term_the_same_noise_held_both():
    """What the term prevents: the mapping-only comparison reads the 40% FLAGS noise as a lift."""
    rows = noise_matrix(clean_term=False)
    assert predict_p1(rows).status == "held" and predict_p4(rows, B=500).status == "held"


def test_a_cell_with_no_clean_baseline_term_leaves_p1_and_p4_undetermined():
    rows = [{**r, "clean_fire": None} if r["task"] == "T3" else r for r in noise_matrix(clean_term=True)]
    for result in (predict_p1(rows), predict_p4(rows, B=200)):
        assert result.status == "undetermined" and "clean-baseline term is unknown" in result.evidence
