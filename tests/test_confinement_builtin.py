"""A built-in row's pipeline runs where the evidence is out of its reach (adapters/confined_server.py).

The standard's LangGraph pipeline is replaced, for one command only (tests/hostile/builtin_wave.py),
by one that first runs tests/hostile/hostile_probe.py: it tries to read the store's seal key, the
store, the run root, another attempt's directory and SABOT_VAR, its parent's and the harness's
/proc environ, and to write outside its working directory. Run through `sabot wave run demo` (a
baseline and one fault run, through the pool, its fork server and the confined server): every
attempt fails inside the pipeline, the cells are scored as usual, nothing outside its attempt changed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from sabot import seal
from sabot.store.db import connect
from tests.test_confinement import DENIED, tree_digest

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "hostile"


def test_a_hostile_built_in_pipeline_reaches_nothing_and_its_cells_are_scored_as_usual(tmp_path):
    var = tmp_path / "var"
    other = var / "runroot" / "demo" / "another-attempt"  # another attempt, where the run root keeps it
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another attempt's record")
    seal.store_key(var / "runroot")
    targets = {"var": str(var), "other_attempt": str(other), "harness": str(ROOT), "harness_pid": os.getpid()}
    hostile_before, other_before = tree_digest(HOSTILE), tree_digest(other)

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    # PYTHONPATH: the hostile module importable by every interpreter of the command (its fork server, the confined server)
    env.update(SABOT_VAR=str(var), HOSTILE_TARGETS=json.dumps(targets), PYTHONPATH=str(HOSTILE))
    command = [
        sys.executable,
        str(HOSTILE / "builtin_wave.py"),
        "wave",
        "run",
        "demo",
        "--framework",
        "langgraph",
        "--config",
        "default",
        "--task",
        "T1",
        "--operator",
        "O1",
        "--seed",
        "11",
    ]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]

    reports = sorted((var / "runs").rglob("hostile_report.json"))
    assert len(reports) == 2, (
        reports
    )  # the baseline's and the O1 run's: each ran the probe once, where the pipeline runs
    for path in reports:
        report = json.loads(path.read_text())
        assert {name: report[name] for name in DENIED if not report[name].startswith("denied: ")} == {}, path
        assert report["list SABOT_VAR"] == "got: []", report["list SABOT_VAR"]
        assert report["SABOT_VAR in the environment"] is None and report["harness settings in the environment"] == []
        assert report["the parent's environment"] in ("got: []", "denied: PermissionError"), report[
            "the parent's environment"
        ]
        # The sandbox's own: bwrap (its pid 1), the confined server, its spare child and the runs in flight.
        assert os.getpid() not in report["processes seen"] and len(report["processes seen"]) <= 3 + len(reports), (
            report["processes seen"]
        )

    with connect(var / "sabot.duckdb", read_only=True) as con:
        runs = con.execute("SELECT operator, status, error FROM runs WHERE wave = 'demo' ORDER BY 1").fetchall()
        verdicts = con.execute("SELECT operator, status FROM cell_verdicts WHERE wave = 'demo'").fetchall()
    assert runs == [("", "present", None), ("O1", "present", None)], runs
    assert verdicts and all(status == "valid" for _, status in verdicts), verdicts

    assert tree_digest(HOSTILE) == hostile_before and tree_digest(other) == other_before
    assert not any(p.exists() for p in (HOSTILE / "planted.txt", var / "planted.txt", ROOT / "planted.txt"))
