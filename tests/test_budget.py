"""Spend: per-framework rates from the store's priced calls, the projection before a wave, the breaker."""

import pytest

from adapters.runner import RunSpec
from sabot.budget import Breaker, BudgetError, Rate, check_projection, project
from sabot.store.db import connect, insert_rows
from sabot.store.spend import CALL_COLUMNS, rates_of, spend_at


def _calls(rows: list[tuple]) -> list[tuple]:
    """(probe, record hash, endpoint, prompt, completion, cost) -> model_calls rows."""
    out = []
    for n, (probe, sha, endpoint, prompt, completion, cost) in enumerate(rows):
        out.append(
            {
                "wave": "w",
                "operator": "O1",
                "probe": probe,
                "run_id": sha,
                "record_sha256": sha,
                "attempt": 1,
                "n": n,
                "model": "gpt-5.6-terra",
                "status": 200,
                "upstream_attempts": 1,
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "cached_tokens": 0,
                "reasoning_tokens": 0,
                "usage_reported": True,
                "cost_usd": cost,
                "price_table": "p",
                "endpoint": endpoint,
            }
        )
    return [tuple(row[c] for c in CALL_COLUMNS) for row in out]


def test_rates_and_spend_come_from_the_stored_calls_per_kind_of_endpoint(tmp_path):
    provider, sim = "provider https://api.example/v1", "simulation (scripted model on 127.0.0.1)"
    with connect(tmp_path / "s.duckdb") as con:
        insert_rows(
            con,
            "model_calls",
            CALL_COLUMNS,
            _calls(
                [
                    ("langgraph.default.T1.11", "a", provider, 1000, 100, 0.10),
                    ("langgraph.default.T1.11", "a", provider, 1000, 100, 0.10),
                    ("langgraph.default.T1.12", "b", provider, 1000, 100, 0.10),  # two runs, three calls
                    ("crewai.guardrail.T1.11", "c", sim, 500, 50, 9.0),  # simulated usage: never a provider's spend
                ]
            ),
        )
        known = rates_of(con, simulated=False)
        assert set(known) == {"langgraph"}
        assert known["langgraph"].runs == 2 and known["langgraph"].calls == 1.5
        assert known["langgraph"].cost == pytest.approx(0.15) and known["langgraph"].tokens == 1650
        assert spend_at(con, simulated=False) == pytest.approx(0.30)
        assert spend_at(con, simulated=True) == pytest.approx(9.0)
        assert set(rates_of(con, simulated=True)) == {"crewai"}


def test_projection_is_runs_times_recorded_rates_per_framework():
    known = {"langgraph": Rate(runs=2, calls=2.0, tokens=2200, cost=0.04)}
    specs = [RunSpec("w", 2, "langgraph", "default", "T1", None, s) for s in range(10)]
    projection = project(specs, known)
    assert projection.cost == pytest.approx(0.40) and projection.calls == 20 and projection.unknown == ()


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


def test_a_wave_of_three_seeds_or_fewer_can_only_cut_cells():
    known = {"crewai": Rate(runs=1, calls=3.0, tokens=9000, cost=1.0)}
    with pytest.raises(BudgetError, match="this wave has 1 seed.*only cells can be cut"):
        check_projection([RunSpec("w", 2, "crewai", "default", "T1", None, 11)] * 2, known, budget=1.5, seeds=(11,))


def test_a_framework_without_recorded_runs_is_a_pilot_named_in_the_projection():
    known = {"crewai": Rate(runs=1, calls=3.0, tokens=9000, cost=1.0)}
    specs = [
        RunSpec("w", 2, "autogen", "default", "T1", None, 11),
        RunSpec("w", 2, "crewai", "default", "T1", None, 11),
    ]
    projection = check_projection(specs, known, budget=10.0, seeds=(11,))
    assert projection.unknown == ("autogen",) and projection.cost == pytest.approx(1.0)


def test_the_breaker_stops_launching_once_spend_reaches_the_cap():
    breaker = Breaker(cap=1.0, spent=0.25)
    assert breaker.may_launch("run-1")
    breaker.add(0.75, "run-1")
    assert breaker.tripped and not breaker.may_launch("run-2")
    assert Breaker(cap=None).may_launch()


def test_runs_in_flight_reserve_their_expected_cost():
    """Eight runs in flight at $0.30 each would pass a $1.00 cap before the first one reports."""
    spec = lambda s: RunSpec("w", 2, "langgraph", "default", "T1", "O1", s)  # noqa: E731
    breaker = Breaker(cap=1.0, spent=0.0, expected={"langgraph": 0.30})
    launched = [s for s in range(8) if breaker.may_launch(spec(s))]
    assert len(launched) == 3  # 0.9 reserved; a fourth would reserve 1.2
    breaker.add(0.05, spec(0))  # cheaper than expected: room for one more
    assert breaker.may_launch(spec(3))
    assert not breaker.may_launch(spec(4))


def test_the_seed_cut_is_a_slice_the_wave_can_run(registry):
    """`--seed` selects the runs the §8 cut keeps; its blocks cover exactly those partitions."""
    from sabot.matrix import Cell
    from sabot_assets.materialize import Block
    from sabot_assets.wave_jobs import Slice, select

    wave = registry.wave("wave1")
    chosen = select(registry, "wave1", Slice(("langgraph",), ("default",), ("T1",), ("O1", "O3", "O4"), (11, 12, 14)))
    assert {probe.seed for _, probe in chosen.slots()} == {11, 12, 14}
    assert len(chosen.slots()) == 3 * (1 + 3)
    block = Block("langgraph", "default", "T1", "T1", chosen.operators, chosen.seeds)
    assert block.probe_ranges(wave) == [
        ("langgraph.default.T1.s11", "langgraph.default.T1.s12"),
        ("langgraph.default.T1.s14",) * 2,
    ]
    covered = set()
    operators = list(wave.operators)
    for start, end in block.cell_ranges(wave):
        first, last = Cell.parse(start), Cell.parse(end)
        for op in operators[operators.index(first.operator) : operators.index(last.operator) + 1]:
            for seed in wave.seeds[wave.seeds.index(first.probe.seed) : wave.seeds.index(last.probe.seed) + 1]:
                covered.add((op, seed))
    assert covered == {(op, seed) for op in ("O1", "O3", "O4") for seed in (11, 12, 14)}
    with pytest.raises(Exception, match="has no seed"):
        select(registry, "wave1", Slice(seeds=(99,)))


def test_breakers_on_one_ledger_share_the_ceiling_and_margin(tmp_path):
    """Two commands' breakers on one store: reservations of both count against each, margined."""
    from sabot.budget import LedgerBreaker
    from sabot.store.ledger import SpendLedger

    spec = lambda s: RunSpec("w", 2, "langgraph", "default", "T1", "O1", s)  # noqa: E731
    first, second = (
        LedgerBreaker(
            SpendLedger(tmp_path / "store.spend.sqlite", "host"), "provider", 1.5, 2.0, {"langgraph": 0.3}, 5.0
        )
        for _ in range(2)
    )
    assert first.may_launch(spec(1)) and first.may_launch(spec(2))  # (0.3 + 0.3) x 2 = 1.2
    assert not second.may_launch(spec(3))  # (0.3 x 3) x 2 = 1.8 would pass the 1.5 ceiling
    assert second.may_fit_later(spec(3))  # once the runs in flight settle below their reservations
    first.add(0.1, spec(1), "w|O1|p|a")
    assert second.may_launch(spec(3))  # (0.1 + 0.3 + 0.3) x 2 = 1.4
    first.add(0.1, spec(1), "w|O1|p|a")  # the same record again (a re-ingest): counted once
    assert first.spent == pytest.approx(0.2)
    pilot = LedgerBreaker(SpendLedger(tmp_path / "store.spend.sqlite", "host"), "provider", 1.5, 2.0, {}, 5.0)
    assert not pilot.may_launch(spec(4)) and not pilot.may_fit_later(spec(4))  # a pilot's worst case never fits


def test_the_registered_margin_and_a_pilot_runs_worst_case(registry):
    from sabot.budget import Margin
    from sabot.pricing import PriceTable

    margin = Margin.from_registry(registry)
    assert margin.factor == 2.0
    # 40 calls x (12,000 x $2.50 + 3,000 x $15.00) per million tokens at the dearer model's prices
    assert margin.pilot_worst_case(PriceTable.from_registry(registry)) == pytest.approx(3.0)


def test_a_runs_bound_lets_no_call_through_past_its_calls_or_its_worst_case(registry):
    from sabot.budget import Margin
    from sabot.pricing import PriceTable

    margin, prices = Margin.from_registry(registry), PriceTable.from_registry(registry)
    bound = margin.run_bound(prices)
    assert (
        bound.limit_usd
        == pytest.approx(margin.pilot_worst_case(prices))
        == pytest.approx(bound.per_call_usd * margin.max_calls)
    )
    small = {"prompt_tokens": 100, "completion_tokens": 10}
    for _ in range(margin.max_calls):  # calls within the token bounds: exactly max_calls go through
        held, why = bound.admit()
        assert why is None
        bound.settle(held, "gpt-5.6-terra", small, answered=True)
    held, why = bound.admit()
    assert held is None and f"registered bound of {margin.max_calls} calls" in why

    billed = margin.run_bound(prices)  # a provider billing twelve times the per-call bounds on every call
    big = {"prompt_tokens": 12 * margin.max_prompt_tokens, "completion_tokens": 12 * margin.max_completion_tokens}
    sent = 0
    while (admitted := billed.admit())[1] is None:
        billed.settle(admitted[0], "gpt-5.6-terra", big, answered=True)
        sent += 1
    assert sent == 3 and billed.paid <= billed.limit_usd  # 4 such calls would pass the run's worst case
    assert "would pass the run's registered bound of $3.00 metered" in admitted[1]


def test_an_unpriced_call_counts_at_the_per_call_worst_case_and_an_unanswered_one_costs_nothing(registry):
    from sabot.budget import Margin
    from sabot.pricing import PriceTable

    bound = Margin.from_registry(registry).run_bound(PriceTable.from_registry(registry))
    held, _ = bound.admit()
    bound.settle(held, "a-model-without-a-price", {"prompt_tokens": 1, "completion_tokens": 1}, answered=True)
    held, _ = bound.admit()
    bound.settle(held, "gpt-5.6-terra", None, answered=False)
    assert bound.paid == pytest.approx(bound.per_call_usd) and bound.held == 0 and bound.calls == 2


def test_a_growing_conversation_is_priced_by_its_size_before_each_call_is_sent(registry):
    """Each call's prompt twice the last one's, billed far past the per-call bounds: the next call is held at
    its own size times the dearest rate per token paid, so the run stops before its bill passes the bound
    (priced at the dearest call paid alone, the sixth call would go and take the run to $3.24)."""
    from sabot.budget import Margin
    from sabot.pricing import PriceTable

    prices = PriceTable.from_registry(registry)
    bound = Margin.from_registry(registry).run_bound(prices)
    tokens, sent = 10_000, 0
    while (admitted := bound.admit(tokens))[1] is None:
        usage = {"prompt_tokens": 2 * tokens, "completion_tokens": 1_000}  # the provider counts twice our estimate
        bound.settle(admitted[0], "gpt-5.6-terra", usage, answered=True, tokens=tokens)
        tokens, sent = tokens * 2, sent + 1
    assert sent == 5 and bound.paid <= bound.limit_usd
    assert bound.paid + bound.dearest <= bound.limit_usd  # the dearest call paid would have let the next one through
    assert (
        prices.cost("gpt-5.6-terra", {"prompt_tokens": 2 * tokens, "completion_tokens": 1_000}) + bound.paid
        > bound.limit_usd
    )
