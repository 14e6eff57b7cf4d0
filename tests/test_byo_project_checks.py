"""Bring your own pipeline, checked without the examples' shared waves: what a project may be and what it is refused.

An example imports nothing of the platform but its registration; a mapping edited after registration is
refused; a malformed project is named; a seam the pipeline never reaches is excluded with its reason; a
baseline that fails is printed as such and blames no seam.
"""

import ast
import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from adapters.byo.runner import execute
from judges.hard.cell import score_cell
from judges.hard.rulesets import load_ruleset
from sabot.matrix import Cell, Probe
from sabot.projects import HEADLINE, Project, ProjectError, ProjectRegistry
from sabot.registry import RegistryError
from sabot_assets.cli import main
from tests.byo_examples import EXAMPLES, ROOT

PLATFORM = {"sabot", "adapters", "operators", "judges", "sabot_assets", "data", "tests"}
ALLOWED = {"sabot.plugins"}  # registration is the one platform import an example may make


def test_a_failing_baseline_is_printed_as_such_and_blames_no_seam(tmp_path):
    """A bug in the test double after registration (the double is the team's code, not a registered
    file): the wave says which baseline failed and what the pass criterion said, judges no landing
    on its cells, and prints no empty tables."""
    copy = tmp_path / "refund_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", copy, ignore=shutil.ignore_patterns("__pycache__"))
    double = copy / "refund_double.py"
    double.write_text(
        double.read_text().replace('return round(paid - float(order.get("shipping", 0)), 2)', "return paid")
    )  # forgets the shipping rule
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sabot"), "wave", "run", str(copy), "--operator", "O3", "--seed", "1"],
        cwd=ROOT,
        env={**env, "SABOT_VAR": str(tmp_path / "var")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, out[-2000:] + done.stderr[-2000:]
    assert "baselines (no fault; a cell is scored only where its baseline passed): none passed" in out
    assert "baseline seed 1: FAILED; pass criterion refund_checks:refund_paid_correctly: returned False" in out
    assert (
        "O3 (model seam, persists): nothing to judge; not judged: its baseline did not pass (seed 1); not judged: not run (seeds 2, 3)"
        in out
    )
    assert "INJECTION_UNVERIFIED" not in out and "Excluded cell classes" not in out and "| group |" not in out
    assert "No fault cell could be scored" in out and "Excluded cells: BASELINE_FAIL 1 (O3 1)" in out


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_editing_the_mapping_after_registration_is_refused(example, tmp_path):
    copy = tmp_path / example.name
    shutil.copytree(example, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert Project.load(copy).lock_problems() == []  # the example ships registered
    mapping = copy / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    doc["surfaces"] = doc["surfaces"][:1]  # strike a surface after seeing the data
    mapping.write_text(json.dumps(doc, indent=1))
    with pytest.raises(ProjectError, match="mapping.json"):
        Project.load(copy).write_lock()
    with pytest.raises(RegistryError, match="mapping.json: edited after registration"):
        ProjectRegistry.from_dir(copy).require_registered()
    done = CliRunner().invoke(main, ["registry", "lock", str(copy)])
    assert done.exit_code == 1 and "mapping.json" in done.output
    done = CliRunner().invoke(main, ["wave", "run", str(copy)])
    assert done.exit_code == 1 and "mapping.json: edited after registration" in done.output


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_example_imports_nothing_of_the_platform(example):
    sources = sorted(example.glob("*.py"))
    assert sources
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert name.split(".")[0] not in PLATFORM or name in ALLOWED, f"{source.name} imports {name}"


def test_an_unreachable_seam_is_excluded_with_its_reason(tmp_path):
    example = next(p for p in EXAMPLES if Project.load(p).framework == "langgraph")
    project = Project.load(example)
    spec = {**project.operators["O1"], "tool": "no_such_tool"}
    broken = Project(project.root, project.doc, project.mapping, {**project.operators, "O1": spec}, project.shas)
    fault = execute(broken, "O1", 1, "unlanded", tmp_path / "f")
    baseline = execute(broken, None, 1, "baseline", tmp_path / "b")
    assert not fault.injection_verified
    assert (
        "no_such_tool" in fault.extra["injection"]["why_not"] and "never called" in fault.extra["injection"]["why_not"]
    )
    ruleset = load_ruleset(ProjectRegistry(project), HEADLINE)
    cell = Cell("O1", Probe(project.framework, project.config, project.task_id, 1))
    assert score_cell(ruleset, cell, fault, baseline).excluded == "INJECTION_UNVERIFIED"


def test_a_bad_project_is_named(tmp_path):
    example = EXAMPLES[0]
    copy = tmp_path / "bad"
    shutil.copytree(example, copy, ignore=shutil.ignore_patterns("__pycache__"))
    ops = copy / "sabot" / "operators.json"
    doc = json.loads(ops.read_text())
    doc["O4"] = {"seam": "tool", "tool": "x", "ground_truth": "y"}
    ops.write_text(json.dumps(doc))
    with pytest.raises(ProjectError, match=r"operators.json: O4: O4 has no tool seam"):
        Project.load(copy)
    (copy / "sabot" / "mapping.json").write_text("{")
    with pytest.raises(ProjectError, match=r"mapping.json: not valid JSON"):
        Project.load(copy)
