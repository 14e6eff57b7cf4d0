"""A team's pipeline runs where the evidence is out of its reach (adapters/confinement.py).

A copy of the refund_desk example whose factory first runs tests/hostile/hostile_probe.py: it tries
to read the store's seal key, the store, the run root, another run's directory and SABOT_VAR, to
read its parent's and the harness's /proc environ, and to write outside its working directory. Run
as a team project through `sabot wave run` (a baseline and one fault run): every attempt fails
inside the pipeline, the cells are scored as usual, and nothing outside its own attempt changed.
"""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from sabot import seal
from sabot.store.db import connect

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("hostile") / "hostile_probe.py"
HOSTILE_FACTORY = """

_unprobed_build_graph = build_graph


def build_graph():
    import hostile_probe

    hostile_probe.probe(Path(__file__).resolve().parent)
    return _unprobed_build_graph()
"""
DENIED = (
    "read the seal key",
    "read the store",
    "list the run root",
    "read another attempt's directory",
    "write outside the work directory (project folder)",
    "write outside the work directory (SABOT_VAR)",
    "write outside the work directory (harness code)",
    "the harness's process",
)


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_hostile_team_pipeline_reaches_nothing_and_its_cells_are_scored_as_usual(tmp_path):
    project, var = tmp_path / "refund_desk", tmp_path / "var"
    shutil.copytree(ROOT / "examples" / "refund_desk", project)
    shutil.copyfile(PROBE, project / PROBE.name)
    with (project / "refund_desk.py").open("a") as factory:
        factory.write(HOSTILE_FACTORY)
    other = var / "runs" / "refund_desk" / "another-run"  # another run's scratch, beside this run's own
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another run's work")
    seal.store_key(var / "runroot")  # the store's key, where the harness keeps it
    (project / "targets.json").write_text(
        json.dumps({"var": str(var), "other_attempt": str(other), "harness": str(ROOT), "harness_pid": os.getpid()})
    )
    project_before, other_before = tree_digest(project), tree_digest(other)

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sabot"), "wave", "run", str(project), "--operator", "O1", "--seed", "1"],
        cwd=ROOT,
        env={**env, "SABOT_VAR": str(var)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]

    reports = sorted((var / "runs").rglob("hostile_report.json"))
    assert len(reports) == 2, reports  # the baseline's and the O1 run's: each ran the probe once
    for path in reports:
        report = json.loads(path.read_text())
        assert {name: report[name] for name in DENIED if not report[name].startswith("denied: ")} == {}, path
        assert report["list SABOT_VAR"] == "got: []", report[
            "list SABOT_VAR"
        ]  # an empty mask: not the store's directory
        assert report["SABOT_VAR in the environment"] is None and report["harness settings in the environment"] == []
        assert report["the parent's environment"] in ("got: []", "denied: PermissionError"), report[
            "the parent's environment"
        ]
        assert len(report["processes seen"]) <= 3 and os.getpid() not in report["processes seen"], report[
            "processes seen"
        ]

    with connect(var / "sabot.duckdb", read_only=True) as con:
        runs = con.execute("SELECT operator, status, error FROM runs WHERE wave = 'refund_desk' ORDER BY 1").fetchall()
        verdicts = con.execute("SELECT operator, status FROM cell_verdicts WHERE wave = 'refund_desk'").fetchall()
    assert [(op, status, error) for op, status, error in runs] == [("", "present", None), ("O1", "present", None)], runs
    assert verdicts and all(status == "valid" for _, status in verdicts), verdicts

    assert tree_digest(project) == project_before and tree_digest(other) == other_before
    assert not any(p.exists() for p in (project / "planted.txt", var / "planted.txt", ROOT / "planted.txt"))
