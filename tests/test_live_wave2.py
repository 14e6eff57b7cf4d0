"""The full LangGraph rows of wave 2 as a live offline wave, checked against the scripted model's
intent log as the demo is in test_live_wave.py (a file of its own: the suite's two longest waves
then run on two test workers at once)."""

import pytest

from sabot.store.db import connect
from tests.test_live_wave import (
    check_scorer_agrees_with_the_intent_log,
    check_the_instrument_check_finds_no_disagreement,
    live_wave,
)


@pytest.fixture(scope="module")
def wave2(registry, tmp_path_factory):
    """2 configs x 6 operators x 5 tasks x 5 seeds + 50 baselines."""
    yield from live_wave(registry, tmp_path_factory, "wave2", ["langgraph"])


def test_scorer_agrees_with_the_intent_log_where_it_is_unambiguous(wave2, registry):
    check_scorer_agrees_with_the_intent_log(wave2[1], "wave2", registry, at_least=200)


def test_every_baseline_passes_on_every_task(wave2):
    """The README's claim, on the rows this fixture runs: 10/10 baselines per task (2 configs x 5 seeds)."""
    _, store_path = wave2
    with connect(store_path, read_only=True) as con:
        rates = con.execute(
            "SELECT task, sum(task_passed::INT), count(*) FROM runs WHERE wave = 'wave2' AND operator = '' GROUP BY task ORDER BY task"
        ).fetchall()
    assert rates == [(t, 10, 10) for t in ("T1", "T2", "T3", "T4", "T5")], rates


def test_the_instrument_check_finds_no_disagreement(wave2):
    check_the_instrument_check_finds_no_disagreement(wave2[1], "wave2", at_least=200)
