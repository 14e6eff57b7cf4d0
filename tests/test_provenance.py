"""Labels from provenance: a board, its spend line and a stop message say what produced the runs
(simulation, provider, local model, replay, or a named mix with counts), never more or less."""

from collections import Counter

from judges.hard.scoreboard import median_entry
from sabot.matrix import Probe
from sabot.pricing import spend_text
from sabot.project_registry import ProjectRegistry
from sabot.provenance import endpoint_kind, is_simulated, kinds, provenance_label
from sabot.store.db import connect, transaction
from sabot.store.runs import RunSlot, write_slots
from sabot.store.spend import spend_of_project, spend_of_wave
from sabot.trace import RunRecord
from sabot_assets.cli.wave import stop_paragraph
from sabot_assets.materialize import RunTally
from sabot_assets.wave_jobs import Slice
from sabot_assets.waves.factory import build_wave
from sabot_assets.waves.scoreboard_assets import conformance_label
from tests.conftest import PROJECT

SCRIPTED = "simulation (scripted model on 127.0.0.1)"
PROVIDER = "provider https://api.example.test/v1"


def test_a_board_label_names_the_one_kind_or_the_mix_with_counts():
    assert provenance_label(kinds([SCRIPTED] * 18)) == "simulation"
    assert provenance_label(kinds([PROVIDER] * 3)) == "derived"  # docs/providers.md: a provider's board
    assert provenance_label(kinds(["local model http://127.0.0.1:8080/v1"] * 2)) == "local model"
    assert provenance_label(kinds([SCRIPTED] * 18 + [PROVIDER] * 3)) == "mix: provider 3, simulation 18"
    assert endpoint_kind(f"replay of runs/x.json ({SCRIPTED})") == "replay (simulation)"
    assert endpoint_kind(f"replay of runs/x.json ({PROVIDER})") == "replay (provider)"
    assert provenance_label(kinds([None])) == "unknown" and provenance_label(Counter()) == "no runs"
    assert is_simulated("mix: provider 3, simulation 18") and is_simulated("replay (simulation)")
    assert not is_simulated("derived") and not is_simulated("local model") and not is_simulated(None)


def record(probe: Probe, operator, endpoint: str, cost: float) -> RunRecord:
    call = {
        "attempt": 1,
        "n": 1,
        "model": "gpt-5.6-terra",
        "status": 200,
        "upstream_attempts": 1,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "cached_tokens": 0,
        "reasoning_tokens": 0,
        "usage_reported": True,
        "cost_usd": cost,
    }
    extra = {"endpoint": endpoint, "usage": {"price_table": "standard/prices.v0.2.1.json", "per_call": [call]}}
    return RunRecord(
        f"{endpoint[:4]}-{operator}-{probe.seed}",
        probe.framework,
        probe.config,
        probe.task,
        operator,
        probe.seed,
        (),
        1 if operator else None,
        bool(operator),
        True,
        None,
        extra=extra,
    )


def mixed_store(path, registry):
    """18 scripted runs (simulated usage $10.50 each) and 3 provider runs ($0.06 each) of one wave."""
    wave = registry.wave("demo")
    probes = [p for p in wave.probes() if p.framework == "langgraph" and p.config == "default"][:4]
    slots = [
        RunSlot(op, p, f"{op}/{p.key}", record(p, op, SCRIPTED, 10.5)) for p in probes[:3] for op in wave.operators
    ]
    slots += [
        RunSlot(op, probes[3], f"{op}/{probes[3].key}", record(probes[3], op, PROVIDER, 0.06))
        for op in wave.operators[:3]
    ]
    with connect(path) as con, transaction(con):
        write_slots(con, "demo", slots, "test")
    return wave


def test_a_board_mixing_scripted_and_provider_runs_is_a_mix_and_its_spend_is_split(registry, tmp_path):
    wave = mixed_store(tmp_path / "s.duckdb", registry)
    with connect(tmp_path / "s.duckdb", read_only=True) as con:
        label = conformance_label(con, wave)
        text = spend_text(spend_of_wave(con, "demo"), spend_of_project(con), margin=1.2)
    assert label == "mix: provider 3, simulation 18"
    assert "provider usage: $0.1800 metered, $0.2160 margined (x1.2) over 3 call(s)" in text
    assert "simulated usage priced at spec prices, no money spent: $189.0000 over 18 call(s)" in text
    assert "spend (provider usage)" not in text and "$189.1800" not in text  # never one sum of both
    entry = median_entry(registry, [], label, ["langgraph/default"])
    assert entry["value"] is None and entry["withheld"].startswith("mix: provider 3, simulation 18: a simulated wave")


def test_a_wave_a_refused_key_stopped_is_derived_and_its_stop_message_counts_every_missing_run(registry, tmp_path):
    store = tmp_path / "s.duckdb"
    mixed_store(store, registry)  # langgraph/default T1 seeds 11-13 hold scripted runs: present, at another endpoint
    with connect(store) as con, transaction(con):
        con.execute(
            "INSERT INTO attempts VALUES ('demo', 'O1', 'langgraph.default.T2.s11', 1, 'stopped', 'r', NULL, 'v', ?, 'm', 'd', 2, "
            "'p', 's', '{}', '[]', 'x', 'a', 'b', now())",
            [PROVIDER],
        )
        con.execute("DELETE FROM runs")  # a fresh wave: the refused key stopped it before any run was stored
        assert conformance_label(con, registry.wave("demo")) == "derived"
    tally = RunTally(not_launched=8, stopped=f"{PROVIDER} answered 401: Incorrect API key provided: [redacted]")
    selection = Slice(("langgraph",), ("default",), ("T1",), None, (11,))
    mixed_store(store, registry)
    paragraph = stop_paragraph(registry, store, "demo", selection, tally, "simulation")
    assert (
        "8 run(s) of this selection are missing" in paragraph
    )  # the slots hold scripted runs: still missing at this endpoint
    assert "the board is labelled simulation, from the runs it holds" in paragraph


def test_a_project_wave_gets_no_instrument_check():
    example = sorted((PROJECT / "examples").glob("*/sabot/project.json"))[0].parent.parent
    project_registry = ProjectRegistry.from_dir(example)
    wave = project_registry.wave(project_registry.project.name)
    assert wave.project and wave.source == "live"
    names = {key.path[-1] for a in build_wave(wave, project_registry).assets for key in a.keys}
    assert "scoreboard" in names and "instrument_check" not in names
