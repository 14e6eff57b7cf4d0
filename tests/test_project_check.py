"""`sabot project check DIR` and `registry lock DIR`: a project's mistakes named before anything is frozen.

Each test copies an example (a team's project as its authors wrote it) and makes one mistake in it.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.byo.check import check
from adapters.byo.runner import run_project
from adapters.runner import RunSpec
from sabot.projects import Project
from sabot_assets.cli import main

ROOT = Path(__file__).resolve().parents[1]
REFUND_DESK, ONCALL, SUPPLIERS = (
    ROOT / "examples" / name for name in ("refund_desk", "oncall_triage", "supplier_vetting")
)


@pytest.fixture(autouse=True)
def short_wall_limit(tmp_path, monkeypatch):
    """A pipeline that hangs fails its test within minutes, not at the registered 30-minute wall limit
    (a CrewAI baseline forked from a process that had run crews hung once)."""
    policy = tmp_path / "wall_limit_policy.json"
    policy.write_text('{"run_wall_limit_seconds": 240}')
    monkeypatch.setenv("SABOT_CALL_POLICY", str(policy))


def copy_of(example: Path, tmp_path: Path, registered: bool = False) -> Path:
    copy = tmp_path / example.name
    shutil.copytree(
        example, copy, ignore=shutil.ignore_patterns("__pycache__", *(() if registered else ("registry.lock.json",)))
    )
    return copy


def edit_json(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc, indent=1))


def edit_code(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    "example, file, edit, expected",
    [
        (
            REFUND_DESK,
            "mapping.json",
            lambda d: d["surfaces"][0].update(node="reviewr"),
            "surfaces[0] (node_output) node: node 'reviewr' is not in the built pipeline; did you mean 'reviewer'?",
        ),
        (
            REFUND_DESK,
            "mapping.json",
            lambda d: d["surfaces"][1].update(to="drafer"),
            "surfaces[1] (routing) to: node 'drafer' is not in the built pipeline; did you mean 'drafter'?",
        ),
        (
            REFUND_DESK,
            "operators.json",
            lambda d: d["O1"].update(tool="lookup_ordr"),
            "operators.json O1: tool 'lookup_ordr' is not in the built pipeline; did you mean 'lookup_order'?",
        ),
        (
            REFUND_DESK,
            "operators.json",
            lambda d: d["O3"].update(agent="reveiwer"),
            "operators.json O3: agent 'reveiwer' is not one of project.json agents; did you mean 'reviewer'?",
        ),
        (
            ONCALL,
            "mapping.json",
            lambda d: d["surfaces"][0].update(agent="critc"),
            "surfaces[0] (agent_message) agent: agent 'critc' is not in the built pipeline; did you mean 'critic'?",
        ),
        (
            SUPPLIERS,
            "operators.json",
            lambda d: d["O6"].update(tool="onboard_suplier"),
            "operators.json O6: tool 'onboard_suplier' is not in the built pipeline; did you mean 'onboard_supplier'?",
        ),
    ],
    ids=["node", "route", "tool", "agent", "autogen-agent", "crewai-tool"],
)
def test_a_misspelled_name_is_rejected_with_the_near_name_and_nothing_is_registered(
    example, file, edit, expected, tmp_path
):
    copy = copy_of(example, tmp_path)
    edit_json(copy / "sabot" / file, edit)
    done = CliRunner().invoke(main, ["project", "check", str(copy)])
    assert done.exit_code == 1 and expected in done.output and "project check FAILED" in done.output
    assert "baseline" not in done.output  # nothing runs while a name is wrong
    done = CliRunner().invoke(main, ["registry", "lock", str(copy)])
    assert done.exit_code == 1 and expected in done.output and "nothing registered" in done.output
    assert not (copy / "sabot" / "registry.lock.json").exists()


@pytest.mark.parametrize("example", [REFUND_DESK, ONCALL, SUPPLIERS], ids=lambda p: p.name)
def test_the_examples_pass_their_check(example, tmp_path):
    report = check(copy_of(example, tmp_path, registered=True))
    assert report.ok, "\n".join(report.lines())
    assert report.baseline.task_passed and report.baseline.extra["pass_criterion"]["passed"]


def test_a_failing_baseline_is_reported_before_the_freeze(tmp_path):
    copy = copy_of(REFUND_DESK, tmp_path)
    edit_code(
        copy / "refund_double.py", 'return round(paid - float(order.get("shipping", 0)), 2)', "return paid"
    )  # a bug in the double
    (copy / "refund_checks.py").write_text(
        (copy / "refund_checks.py")
        .read_text()
        .replace("return entries == [", 'print("ledger:", entries)\n    return entries == [')
    )
    done = CliRunner().invoke(main, ["registry", "lock", str(copy)])
    assert done.exit_code == 1 and not (copy / "sabot" / "registry.lock.json").exists()
    # the reviewer lets the double's wrong amount through: the ledger shows it
    assert (
        "baseline seed 1: FAILED; pass criterion refund_checks:refund_paid_correctly: ledger: [{'order_id': 'A-1001', 'amount': 84.0}]"
        in done.output
    )
    assert "nothing registered" in done.output


def test_a_factory_that_raises_is_named_by_file_and_line(tmp_path):
    copy = copy_of(REFUND_DESK, tmp_path)
    edit_code(
        copy / "refund_desk.py",
        "    llm = ChatOpenAI(model=MODEL, max_retries=1)",
        "    llm = ChatOpenAl(model=MODEL, max_retries=1)",
    )
    report = check(copy)
    line = next(
        i for i, text in enumerate((copy / "refund_desk.py").read_text().splitlines(), 1) if "ChatOpenAl(" in text
    )
    assert report.problems == [
        f"pipeline factory refund_desk:build_graph failed at refund_desk.py:{line} in build_graph: "
        "NameError: name 'ChatOpenAl' is not defined"
    ]
    spec = RunSpec("refund_desk", 1, "langgraph", "own", "refund", None, 1)
    assert (
        run_project(spec, Project.load(copy), tmp_path / "runs").record.error == report.problems[0]
    )  # at once, no retry


def test_a_missing_factory_is_named(tmp_path):
    copy = copy_of(REFUND_DESK, tmp_path)
    edit_json(copy / "sabot" / "project.json", lambda d: d.update(pipeline="refund_desk:build_grap"))
    assert check(copy).problems == [
        "pipeline factory refund_desk:build_grap failed: PluginError: refund_desk: pipeline: module 'refund_desk' has no attribute 'build_grap'"
    ]


@pytest.mark.parametrize(
    "what, file, old, new, expected",
    [
        (
            "pass criterion",
            "refund_checks.py",
            "    ledger = workdir",
            "    ledger = workdir / output['nope']\n    ledger = workdir",
            "pass criterion refund_checks:refund_paid_correctly failed at refund_checks.py:{line} in refund_paid_correctly: KeyError: 'nope'",
        ),
        (
            "test double",
            "refund_double.py",
            '        system = request["messages"][0]["content"]',
            '        system = request["messages"][7]["content"]',
            "test double refund_double:make_responder failed at refund_double.py:{line} in respond: IndexError: list index out of range",
        ),
    ],
)
def test_errors_in_the_team_code_name_the_file_and_the_error(what, file, old, new, expected, tmp_path):
    copy = copy_of(REFUND_DESK, tmp_path)
    edit_code(copy / file, old, new)
    line = next(i for i, text in enumerate((copy / file).read_text().splitlines(), 1) if text == new.splitlines()[0])
    expected = expected.format(line=line)
    assert check(copy).problems == [expected]
    spec = RunSpec("refund_desk", 1, "langgraph", "own", "refund", "O1", 1)
    assert run_project(spec, Project.load(copy), tmp_path / "runs").record.error == expected


def test_a_wave_of_a_broken_factory_is_refused_naming_it_before_any_run(tmp_path):
    """The gate builds the factory before any run (a run that builds it is a RUN_ERROR naming it: above)."""
    copy = copy_of(REFUND_DESK, tmp_path, registered=True)
    edit_code(
        copy / "refund_desk.py",
        "    graph = StateGraph(Ticket)",
        "    graph = StateGraph(Ticket)\n    raise RuntimeError('staging order service is down')",
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sabot"), "wave", "run", str(copy), "--operator", "O1", "--seed", "1"],
        cwd=ROOT,
        env={**env, "SABOT_VAR": str(tmp_path / "var")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "_RemoteTraceback" not in out
    assert (
        "pipeline factory refund_desk:build_graph failed at refund_desk.py:" in out
        and "RuntimeError: staging order service is down" in out
    )
    assert "refund_desk: refused before any run" in out and not (tmp_path / "var" / "sabot.duckdb").exists()
