"""A team's pipeline on the built-in run path: pipeline -> fault layer -> model gateway -> provider.

Each example project (LangGraph, AutoGen, CrewAI, Agent Framework) is copied with its model ids set to the registered
pins, and run as `sabot wave run` against a stand-in provider on 127.0.0.1 (the project's own test
double behind the scripted server, reporting usage and dated ids like gpt-5.6-luna-2026-07-01).
One wave per project, one seed, the baseline and O4; then, in order: a `--replay` against a dead
endpoint, a `--rerun` against a provider refusing the key (401: the wave stops), and a run after the pass criterion
changed. Everything is a real wave into the session's store.
"""

import contextlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.gateway.exchange import usage_of
from adapters.scripted.reply import Reply
from sabot.pricing import PriceTable
from sabot.project_registry import ProjectRegistry
from sabot.projects import Project
from sabot.store.db import connect
from sabot.store.runs import scored_attempts
from sabot.store.verdicts import read_verdicts
from sabot_assets.cli import main
from sabot_assets.constants import STORE_PATH
from tests.project_provider import DATED, KEY, QUICK_POLICY, Provider

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "langgraph": "refund_desk",
    "autogen": "oncall_triage",
    "crewai": "supplier_vetting",
    "agent_framework": "expense_audit",
}
PINS = {"-large": "gpt-5.6-terra", "-mini": "gpt-5.6-luna"}  # the examples' own tiers, renamed to priced pins
ENV_PROBE = (
    "\n\n# Added by the test: what the pipeline's own process holds in its environment, written where it runs.\n"
    "import json as _json, os as _os\n"
    "with open('pipeline-environ.json', 'w') as _out:\n"
    "    _json.dump(dict(_os.environ), _out)\n"
)


def copy_example(name: str, tmp: Path) -> Path:
    """The example under a name of its own, its models the registered pins, an environment probe in
    its pipeline module, registered anew."""
    copy = tmp / f"path_{name}"
    shutil.copytree(ROOT / "examples" / name, copy, ignore=shutil.ignore_patterns("__pycache__", "registry.lock.json"))
    for path in [*copy.glob("*.py"), copy / "sabot" / "operators.json"]:
        text = path.read_text()
        for suffix, pin in PINS.items():
            text = text.replace(f'"{_tier(name)}{suffix}"', f'"{pin}"')
        path.write_text(text)
    doc = json.loads((copy / "sabot" / "project.json").read_text())
    doc["name"] = copy.name
    (copy / "sabot" / "project.json").write_text(json.dumps(doc, indent=1))
    factory = Project.load(copy).module_file(doc["pipeline"])
    factory.write_text(factory.read_text() + ENV_PROBE)
    Project.load(copy).write_lock()
    return copy


def _tier(name: str) -> str:
    return {
        "refund_desk": "refund-desk",
        "oncall_triage": "oncall",
        "supplier_vetting": "vetting",
        "expense_audit": "audit",
    }[name]


@dataclass
class Waves:
    project: Project
    provider_exchanges: list
    outputs: dict = field(default_factory=dict)
    codes: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)
    scored: dict = field(default_factory=dict)
    spend: dict = field(default_factory=dict)
    records: dict = field(default_factory=dict)
    sent: dict = field(default_factory=dict)
    environs: list = field(default_factory=list)
    record_spend: list = field(default_factory=list)


def _state(project: Project) -> tuple[dict, dict, dict]:
    """(verdicts by cell, scored attempt and outcome by slot, model_calls sums) of the project's wave."""
    registry = ProjectRegistry(project)
    wave = registry.wave(project.name)
    slots = [(op, p.key) for op in ("", *wave.operators) for p in wave.probes() if p.seed == 1]
    with connect(STORE_PATH, read_only=True) as con:
        verdicts = {
            (v["operator"], v["probe"]): {
                k: v[k] for k in ("status", "excluded", "detected_hard", "reacted", "recovered", "missing")
            }
            for v in read_verdicts(con, wave.name, wave.headline_ruleset)
            if v["seed"] == 1
        }
        scored = {slot: a for slot, a in scored_attempts(con, wave.name, slots).items()}
        calls, cost = con.execute(
            "SELECT count(*), sum(cost_usd) FROM model_calls WHERE wave = ?", [wave.name]
        ).fetchone()
    return verdicts, scored, {"calls": calls, "cost_usd": cost}


@pytest.fixture(scope="module", params=list(EXAMPLES), ids=list(EXAMPLES))
def waves(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    copy = copy_example(EXAMPLES[request.param], tmp)
    project = Project.load(copy)
    (tmp / "policy.json").write_text(json.dumps(QUICK_POLICY))
    provider = Provider(project)
    wave = ["wave", "run", str(copy), "--seed", "1", "--operator", "O4"]
    with pytest.MonkeyPatch.context() as mp, provider.server:
        mp.setenv("SABOT_MODEL_BASE_URL", provider.server.base_url)
        mp.setenv("SABOT_MODEL_API_KEY", KEY)
        mp.setenv("SABOT_CALL_POLICY", str(tmp / "policy.json"))
        out = Waves(project, [])

        def step(name: str, *extra: str) -> None:
            before = len(provider.server.exchanges)
            done = CliRunner().invoke(main, wave + list(extra))
            out.outputs[name], out.codes[name] = done.output, done.exit_code
            out.sent[name] = len(provider.server.exchanges) - before
            out.verdicts[name], out.scored[name], out.spend[name] = _state(project)

        step("provider")
        out.provider_exchanges = list(provider.server.exchanges)
        out.environs = [
            json.loads(p.read_text())
            for p in (STORE_PATH.parent / "runs" / project.name).rglob("pipeline-environ.json")
        ]
        provider.mode = "dead"
        step("replay", "--replay")
        provider.mode = "refuse"
        step("refused", "--rerun")
        provider.mode = "serve"
        check = project.module_file(project.doc["task"]["pass"])
        check.write_text(check.read_text() + "\n# reviewed: the amount is compared to the cent\n")
        step("criterion changed")
        with usage_scaled(_scale_to_pass_the_bound(project, out.provider_exchanges)):
            step("billed past the bound", "--rerun")
        out.record_spend = _record_spend(project)
    yield out


@contextlib.contextmanager
def usage_scaled(scale: float):
    """The provider bills every call at `scale` times the usage the scripted server would report."""
    from adapters.scripted import wire as scripted_wire

    reported = scripted_wire.usage_for

    def scaled(request: dict, reply: Reply) -> dict:
        usage = reported(request, reply)
        prompt, completion = round(usage["prompt_tokens"] * scale), round(usage["completion_tokens"] * scale)
        return {**usage, "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scripted_wire, "usage_for", scaled)
        yield


def _scale_to_pass_the_bound(project: Project, served: list) -> float:
    """How much more to bill each call so the dearest call seen costs 0.7 of a run's registered worst case:
    no single call passes the bound, two such calls would."""
    from sabot.budget import Margin

    registry = ProjectRegistry(project)
    prices = PriceTable.from_registry(registry)
    dearest = max(prices.cost(x["model"], usage_of(x["reply"])) or 0 for x in served if x["status"] == 200)
    return 0.7 * Margin.from_registry(registry).pilot_worst_case(prices) / dearest


def _record_spend(project: Project) -> list[tuple]:
    """(record, metered USD, unsent calls) for every run record of the project's wave in the store."""
    with connect(STORE_PATH, read_only=True) as con:
        return con.execute(
            "SELECT record_sha256, coalesce(sum(cost_usd), 0), count(*) FILTER (status = 403 AND cost_usd IS NULL) "
            "FROM model_calls WHERE wave = ? GROUP BY 1",
            [project.name],
        ).fetchall()


def test_spend_is_the_sum_of_the_priced_calls_the_provider_served(waves):
    assert waves.codes["provider"] == 0, waves.outputs["provider"]
    prices = PriceTable.from_registry(ProjectRegistry(waves.project))
    served = [x for x in waves.provider_exchanges if x["status"] == 200]
    expected = sum(prices.cost(x["model"], usage_of(x["reply"])) for x in served)
    assert served and all(x["model"].endswith(f"-{DATED}") for x in served)  # the provider reported dated ids
    assert waves.spend["provider"]["calls"] == len(
        waves.provider_exchanges
    )  # every call in the ledger, none priced at 0
    assert expected > 0 and waves.spend["provider"]["cost_usd"] == pytest.approx(expected, rel=1e-6)


def test_o4_lands_when_the_provider_reports_a_dated_id_of_the_target(waves):
    o4 = [v for (op, _), v in waves.verdicts["provider"].items() if op == "O4"]
    assert o4 and all(v["status"] == "valid" for v in o4), o4  # not INJECTION_UNVERIFIED
    records = [a.record for (op, _), a in waves.scored["provider"].items() if op == "O4"]
    assert all(r.injection_verified and "gpt-5.6-luna-2026-07-01" in r.served_model_ids() for r in records)


def test_a_replay_sends_nothing_and_reproduces_the_verdicts(waves):
    assert waves.codes["replay"] == 0, waves.outputs["replay"]
    assert waves.sent["replay"] == 0  # the endpoint was dead and was never asked
    assert waves.verdicts["replay"] == waves.verdicts["provider"]
    assert all(
        a.number > waves.scored["provider"][slot].number for slot, a in waves.scored["replay"].items()
    )  # re-executed, not reused


def test_a_refused_key_stops_the_wave_and_never_supersedes_the_stored_good_run(waves):
    """The built-in runs' taxonomy: a 401 is endpoint-fatal, the wave stops, its cells stay missing (never RUN_ERROR)."""
    out = waves.outputs["refused"]
    assert waves.codes["refused"] == 1 and "401" in out and "the wave stopped" in out, out
    assert re.search(r"RUN_ERROR: [1-9]", out) is None, out
    assert 1 <= waves.sent["refused"] <= 2, waves.sent[
        "refused"
    ]  # the first refusal stops every later call (2 runs at most in flight)
    before, after = waves.scored["replay"], waves.scored["refused"]
    assert {slot: (a.number, a.outcome) for slot, a in after.items()} == {
        slot: (a.number, a.outcome) for slot, a in before.items()
    }
    assert waves.verdicts["refused"] == waves.verdicts["provider"]


def test_a_changed_pass_criterion_reruns_the_stored_cells_and_says_why(waves):
    output = waves.outputs["criterion changed"]
    check = waves.project.module_file(waves.project.doc["task"]["pass"]).name
    assert waves.codes["criterion changed"] == 0, output
    assert f"2 cell(s) rerun: pass criterion {check} changed" in output
    assert "runs: 2 run, 0 reused" in output


def test_a_provider_billing_past_the_registered_bounds_never_costs_a_run_more_than_its_reservation(waves):
    """The built-in runs' per-run bound holds for a team's pipeline too: a call that could take the run past
    its registered worst case (what a pilot reserves) is not sent, the run is RUN_ERROR naming the bound."""
    from sabot.budget import Margin

    registry = ProjectRegistry(waves.project)
    reservation = Margin.from_registry(registry).pilot_worst_case(PriceTable.from_registry(registry))
    output = waves.outputs["billed past the bound"]
    assert waves.codes["billed past the bound"] == 1 and "would pass the run's registered bound" in output, output
    assert any(unsent for _, _, unsent in waves.record_spend), "no call was held back: the bill never reached the bound"
    spent = max(spent for _, spent, _ in waves.record_spend)
    assert spent > 0
    # Each call is held at its own worst case (its counted prompt and max_tokens) before it is sent, so an
    # honest bill never passes the reservation; this provider bills past what was asked, the one exception,
    # and the run says so.
    if spent > reservation:
        assert "billed past their own request's limits" in output, (spent, reservation, output)


def test_the_pipeline_process_holds_no_provider_key(waves):
    assert len(waves.environs) >= 2  # written from inside the pipeline, once per run
    for environ in waves.environs:
        assert not any(KEY in value for value in environ.values())
        assert "SABOT_MODEL_API_KEY" not in environ and "SABOT_MODEL_BASE_URL" not in environ
        assert environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:") and environ["OPENAI_API_KEY"] != KEY


def test_a_projects_code_and_its_fault_durations_are_part_of_a_runs_identity(monkeypatch):
    from adapters.run_attempt import current_identity
    from sabot import projects
    from sabot.runroot import Identity

    registry = ProjectRegistry(Project.load(ROOT / "examples" / "refund_desk"))
    now = current_identity(registry, "runner-v1", 1)
    assert set(now.code) == {"pipeline", "test double", "pass criterion", "fault durations"}
    assert list(now.code["pass criterion"]) == ["refund_checks.py"] and "refund_desk.py" in now.code["pipeline"]
    before = Identity(
        **{k: v for k, v in now.as_dict().items() if k != "code"}
    )  # a run stored before code was identity
    assert now != before and now.change_from(before) == "stored before the project's code was part of a run's identity"
    monkeypatch.setitem(projects.DEFAULT_DURATION, "tool", "once")
    changed = current_identity(registry, "runner-v1", 1)
    assert changed != now and changed.change_from(now) == "default fault durations changed (model persists, tool once)"
    assert Identity(**json.loads(json.dumps(now.as_dict()))) == now  # as attempt.json stores and reads it back
