"""The soft tier: cached reference verdicts score with no model call; kappa's blocking check flips at the bound."""

import json
import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from judges.soft.cache import soft_outcome
from sabot.store.published import read_report
from sabot.store.db import connect, transaction
from sabot.store.judging import read_judgements, write_judgements
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import WaveRunner
from tests.conftest import WAVE2_DIR, require_corpus


def test_reference_judge_verdicts_score_with_no_model_call(registry, tmp_path, monkeypatch):
    require_corpus()
    block = "harness/runs/wave2/langgraph/default/T5"
    shutil.copytree(WAVE2_DIR / "langgraph" / "default" / "T5", tmp_path / "corpus" / block)

    def no_model(*_):
        raise AssertionError("a judge backend was constructed: scoring cached verdicts must call no model")

    monkeypatch.setattr("sabot_assets.waves.judging.backend_from_env", no_model)
    store_path = tmp_path / "s.duckdb"
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
        score_corpus(import_corpus(registry, defs, instance, store_path, tmp_path / "corpus", "public_wave2"))
    with connect(store_path, read_only=True) as con:
        judged = read_judgements(con, "public_wave2")
        hard = dict(
            con.execute(
                "SELECT operator || '|' || probe, detected_hard FROM cell_verdicts WHERE wave = 'public_wave2' AND ruleset = 'v0.2.0'"
            ).fetchall()
        )
        board = json.loads(read_report(con, "public_wave2", "v0.2.0", "board.json"))
    assert {v["backend"] for v in judged.values()} == {"reference"}
    assert ("O3", "langgraph.default.T5.s15", 1) in judged  # the shipped variant-1 file
    verdict = judged[("O3", "langgraph.default.T5.s15", 0)]
    outcome = soft_outcome(hard["O3|langgraph.default.T5.s15"], _as_verdict(verdict))
    assert outcome["judged"] and outcome["soft_notice"]
    row = next(e for e in board["tables"]["framework_config"] if e["group"] == "langgraph/default")
    assert row["counts"]["judged"] == sum(1 for (_, _, v) in judged if v == 0)


def _as_verdict(row):
    from judges.soft.verdict import JudgeVerdict

    return JudgeVerdict(
        row["noticed"],
        row["by_which_component"],
        row["evidence_quote"],
        row["prompt_variant"],
        row["raw"],
        row["backend"],
        row["backend_version"],
        row["status"],
    )


def judged_pairs(pairs):
    """Judge-verdict rows for constructed double-judged cells (variant 0 and 1 per cell)."""
    rows = []
    for i, (a, b) in enumerate(pairs):
        for variant, noticed in ((0, a), (1, b)):
            rows.append(
                {
                    "wave": "demo",
                    "operator": "O1",
                    "probe": f"langgraph.default.T1.s{i}",
                    "prompt_variant": variant,
                    "backend": "test",
                    "backend_version": None,
                    "status": "ok",
                    "noticed": noticed,
                    "by_which_component": None,
                    "evidence_quote": None,
                    "raw": "{}",
                    "attempts": 1,
                    "reason": None,
                    "source": None,
                    "dagster_run_id": "test",
                }
            )
    return rows


# FULL, 20 cells: 10 both-yes, 8 both-no, 1 + 1 disagreements -> po = 0.90; marginals 11/20 and 11/20
#   -> pe = 0.55^2 + 0.45^2 = 0.505; kappa = (0.90 - 0.505) / 0.495 = 0.798 (>= 0.7).
# LOW: 10 both-yes, 7 both-no, 2 + 1 disagreements -> po = 0.85; marginals 12/20 and 11/20
#   -> pe = 0.60 * 0.55 + 0.40 * 0.45 = 0.51; kappa = (0.85 - 0.51) / 0.49 = 0.694 (< 0.7).
FULL = [(True, True)] * 10 + [(False, False)] * 8 + [(True, False)] + [(False, True)]
LOW = [(True, True)] * 10 + [(False, False)] * 7 + [(True, False)] * 2 + [(False, True)]


@pytest.mark.parametrize(("pairs", "passes"), [(FULL, True), (LOW, False)])
def test_the_kappa_check_flips_at_the_bound(registry, tmp_path, pairs, passes):
    store_path = tmp_path / "s.duckdb"
    rows = judged_pairs(pairs)
    with connect(store_path) as con, transaction(con):
        write_judgements(con, "demo", sorted({(r["operator"], r["probe"]) for r in rows}), rows)
    defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
    with dg.instance_for_test() as instance:
        assert WaveRunner(defs, registry.wave("demo"), instance).kappa() is passes
    with connect(store_path, read_only=True) as con:
        audit = json.loads(read_report(con, "demo", "soft", "kappa.json"))
    assert audit["n"] == 20 and audit["confidence"] == ("full" if passes else "low-confidence")
    assert round(audit["kappa"], 3) == (0.798 if passes else 0.694)


def _run_with_texts(texts, injection_seq):
    from sabot.trace import Event, RunRecord

    events = tuple(Event(i + 1, "reviewer", "agent-msg", {"text": t}) for i, t in enumerate(texts))
    return RunRecord("r", "langgraph", "default", "T1", "O1", 11, events, injection_seq, True, True, None)


def test_a_judge_quote_written_before_the_injection_is_not_detected_soft():
    from judges.hard.funnel import derived_counts, with_soft
    from judges.soft.location import located

    record = _run_with_texts(
        ["the body cites 47.1   as superseded", "tool result written", "final answer 74.1"], injection_seq=2
    )
    row = {
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
    key = (row["operator"], row["probe"])

    def counts(quote):
        verdict = {"status": "ok", "noticed": True, "evidence_quote": quote}
        (scored,) = with_soft([row], located({key: verdict}, {key: record}))
        return derived_counts(scored)

    early = counts("the body cites 47.1 as superseded")  # whitespace re-wrapped, seq 1 only
    assert (early["detected_soft"], early["soft_pre_injection"], early["missed"], early["undecided"]) == (0, 1, 0, 1)
    late = counts("final answer 74.1")  # seq 3, after the fault was planted at seq 2
    assert (late["detected_soft"], late["soft_pre_injection"]) == (1, 0)
    unlocated = counts("a sentence no event wrote")  # the judge saw text the record does not hold: left as ruled
    assert (unlocated["detected_soft"], unlocated["soft_pre_injection"]) == (1, 0)
