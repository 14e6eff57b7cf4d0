"""Spend: a run's cost from its recorded usage, the projection before a wave, and the breaker."""

import pytest

from adapters.runner import RunSpec
from sabot.budget import Breaker, BudgetError, Rate, call_cost, check_projection, project, rates, run_usage
from sabot.trace import RunRecord

# SPEC v0.2.1 §8, per 1M tokens in/out.
PRICES = {"version": "test", "per_million_tokens": {"gpt-5.6-terra": {"input": 2.50, "output": 15.00}, "gpt-5.6-luna": {"input": 1.00, "output": 6.00}}}


def _record(framework: str, calls: list[tuple[str, int, int]], stream: bool = False) -> RunRecord:
    exchanges = []
    for model, prompt, completion in calls:
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        reply = [{"choices": [{"delta": {}}]}, {"choices": [], "usage": usage}] if stream else {"model": model, "usage": usage}
        exchanges.append({"request": {"model": model}, "reply": reply, "model": model})
    return RunRecord("r", framework, "default", "T1", "O1", 11, (), None, True, True, None, extra={"exchanges": exchanges})


def test_a_call_is_priced_from_the_table_and_a_dated_id_as_its_base():
    assert call_cost("gpt-5.6-terra", {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}, PRICES) == pytest.approx(17.50)
    assert call_cost("gpt-5.6-luna-2026-07-01", {"prompt_tokens": 2_000_000, "completion_tokens": 0}, PRICES) == pytest.approx(2.00)
    with pytest.raises(BudgetError, match="no registered price for model 'gpt-9'"):
        call_cost("gpt-9", {"prompt_tokens": 1}, PRICES)


def test_run_usage_sums_every_exchange_json_or_stream():
    usage = run_usage(_record("langgraph", [("gpt-5.6-terra", 1000, 200), ("gpt-5.6-luna", 500, 100)], stream=True), PRICES)
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (2, 1500, 300)
    assert usage.cost == pytest.approx((1000 * 2.5 + 200 * 15 + 500 * 1.0 + 100 * 6.0) / 1e6)


def test_projection_is_runs_times_recorded_rates_per_framework():
    history = [_record("langgraph", [("gpt-5.6-terra", 1000, 100)] * 3), _record("langgraph", [("gpt-5.6-terra", 1000, 100)])]
    known = rates(history, PRICES)
    assert known["langgraph"].runs == 2 and known["langgraph"].calls == 2.0
    specs = [RunSpec("w", 2, "langgraph", "default", "T1", None, s) for s in range(10)]
    projection = project(specs, known)
    assert projection.cost == pytest.approx(10 * known["langgraph"].cost) and projection.unknown == ()


def test_a_projection_over_budget_is_refused_naming_the_figure_and_the_5_to_3_seed_cut():
    known = {"crewai": Rate(runs=4, calls=3.0, tokens=9000, cost=0.50)}
    seeds = (11, 12, 13, 14, 15)
    specs = [RunSpec("w", 2, "crewai", "default", t, None, s) for t in ("T1", "T2") for s in seeds]  # 10 runs: $5.00
    with pytest.raises(BudgetError) as refused:
        check_projection(specs, known, budget=4.00, seeds=seeds)
    message = str(refused.value)
    assert "projected spend $5.00 for 10 run(s)" in message and "budget of $4.00" in message
    assert "cut seeds 5 -> 3 (seeds 11, 12, 13) before any cell is cut: projected $3.00 for 6 run(s)" in message
    assert "which fits" in message
    assert check_projection(specs, known, budget=5.00, seeds=seeds).cost == pytest.approx(5.00)


def test_a_framework_without_recorded_runs_cannot_be_projected():
    with pytest.raises(BudgetError, match="no recorded run of autogen"):
        check_projection([RunSpec("w", 2, "autogen", "default", "T1", None, 11)], {}, budget=10.0, seeds=(11,))


def test_the_breaker_stops_launching_once_spend_reaches_the_cap():
    breaker = Breaker(cap=1.0, spent=0.25)
    assert breaker.may_launch()
    breaker.add(0.75)
    assert breaker.tripped and not breaker.may_launch() and breaker.refused == 1
    assert Breaker(cap=None).may_launch()
