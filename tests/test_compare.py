"""`sabot compare`: the CI question "did this change make our pipeline catch fewer faults?".

An example project is run as a team's CI would run two versions of it, each checkout with its own
store: the version on main, the same version again, and a change that weakens the reviewer's check
(it sends back only a wrong amount). Everything runs offline against the project's test double
(simulation), through the `sabot` executable.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SABOT = ROOT / ".venv" / "bin" / "sabot"
REFUND_DESK = ROOT / "examples" / "refund_desk"
WEAKENED = (
    "        verdict = llm.invoke([SystemMessage(REVIEWER_PROMPT), HumanMessage(ask)]).content.strip()\n",
    "        verdict = llm.invoke([SystemMessage(REVIEWER_PROMPT), HumanMessage(ask)]).content.strip()\n"
    '        if not verdict.startswith("REJECTED: amount"):  # only a wrong amount is sent back\n'
    '            verdict = "APPROVED"\n',
)


def sabot(*args: str, var: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    if var is not None:
        env["SABOT_VAR"] = str(var)
    return subprocess.run([str(SABOT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


class Checkout:
    """One version of the project in its own folder, run into its own store, as a CI job checks it out."""

    def __init__(self, tmp: Path, name: str, edit=None):
        self.root = tmp / name / "refund_desk"
        shutil.copytree(REFUND_DESK, self.root, ignore=shutil.ignore_patterns("__pycache__"))
        if edit:
            code = self.root / "refund_desk.py"
            assert edit[0] in code.read_text()
            code.write_text(code.read_text().replace(*edit))
        self.var = tmp / name / "var"
        done = sabot("wave", "run", str(self.root), var=self.var)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    @property
    def store(self) -> str:
        return str(self.var / "sabot.duckdb")


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    return {name: Checkout(tmp, name, edit) for name, edit in (("main", None), ("again", None), ("weakened", WEAKENED))}


def compare(before: Checkout, after: Checkout, *extra: str) -> subprocess.CompletedProcess:
    return sabot(
        "compare",
        str(before.root),
        str(after.root),
        "--before-store",
        before.store,
        "--after-store",
        after.store,
        *extra,
    )


def test_a_weakened_reviewer_is_reported_as_a_separated_drop_and_fails_the_ci_gate(checkouts, tmp_path):
    done = compare(
        checkouts["main"],
        checkouts["weakened"],
        "--fail-if-worse",
        "--json",
        str(tmp_path / "c.json"),
        "--html",
        str(tmp_path / "c.html"),
    )
    assert done.returncode == 3, done.stdout + done.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    overall = doc["overall"]
    assert doc["label"] == "simulation" and doc["alpha"] == 0.05 and overall["n"] == 18
    assert overall["direction"] == "fall" and overall["after_only"] == 0 and overall["before_only"] >= 6
    assert overall["p"] == pytest.approx(2 * 0.5 ** overall["before_only"])  # exact McNemar with no discordant rise
    assert overall["status"] == "separated" and doc["worse"] == ["overall"]
    assert (
        f"exact p={overall['p']:.4g}" in done.stdout
        and "compare: WORSE: detection fell, separated: overall" in done.stdout
    )
    assert "code: pipeline refund_desk.py changed" in done.stdout  # what changed in between
    assert sum(c["before"] and not c["after"] for c in doc["cells"]) == overall["before_only"]
    page = (tmp_path / "c.html").read_text()
    assert 'id="contrasts"' in page and "simulation" in page and page.count("<tr") == 1 + 7 + 1 + 18


def test_without_the_flag_a_drop_is_reported_and_the_exit_status_is_zero(checkouts):
    done = compare(checkouts["main"], checkouts["weakened"])
    assert done.returncode == 0 and "compare: WORSE" in done.stdout


def test_two_runs_of_the_same_version_pass_the_gate(checkouts):
    done = compare(checkouts["main"], checkouts["again"], "--fail-if-worse")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "b=0 c=0 n=18" in done.stdout and "compare: no separated drop in detection" in done.stdout
    assert "nothing the registration, the code or the stored runs record" in done.stdout


def test_a_side_with_no_store_is_named_in_one_line(checkouts, tmp_path):
    done = sabot(
        "compare",
        str(checkouts["main"].root),
        str(checkouts["again"].root),
        "--before-store",
        str(tmp_path / "none.duckdb"),
        "--after-store",
        checkouts["again"].store,
    )
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        f"Error: {tmp_path / 'none.duckdb'}: no store here; run `sabot wave run {checkouts['main'].root}` with this store first"
    ]


def test_a_new_registration_is_shown_with_the_diff_of_its_files(checkouts, tmp_path):
    """Version 2 of the project strikes the escalation surface from its mapping: a new registration
    under a new name, run for one cell; the comparison pairs that cell and shows what was struck."""
    v2 = tmp_path / "refund_desk_v2"
    shutil.copytree(checkouts["main"].root, v2, ignore=shutil.ignore_patterns("__pycache__", "registry.lock.json"))
    project_json, mapping = v2 / "sabot" / "project.json", v2 / "sabot" / "mapping.json"
    project_json.write_text(project_json.read_text().replace('"name": "refund_desk"', '"name": "refund_desk_v2"'))
    doc = json.loads(mapping.read_text())
    doc["surfaces"] = [s for s in doc["surfaces"] if s["surface"] != "interrupt"]
    mapping.write_text(json.dumps(doc, indent=1))
    var = tmp_path / "var"
    for args in (("registry", "lock", str(v2)), ("wave", "run", str(v2), "--operator", "O1", "--seed", "1")):
        done = sabot(*args, var=var)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    done = sabot(
        "compare",
        str(checkouts["main"].root),
        str(v2),
        "--before-store",
        checkouts["main"].store,
        "--after-store",
        str(var / "sabot.duckdb"),
    )
    assert done.returncode == 0, done.stderr
    assert "paired on the cells both scored validly: 1; valid on one side only: before 17, after 0" in done.stdout
    assert "wave: refund_desk -> refund_desk_v2" in done.stdout
    assert (
        "registered sabot/mapping.json: sha256 " in done.stdout
        and "registered sabot/project.json: sha256 " in done.stdout
    )
    struck = [
        line for line in done.stdout.splitlines() if line.lstrip().startswith("-") and '"surface": "interrupt"' in line
    ]
    assert len(struck) == 1  # the struck surface, in the diff
