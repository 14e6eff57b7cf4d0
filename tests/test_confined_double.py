"""A team's test double runs in a sandbox of its own (adapters/byo/double.py), not in the run's process.

The double is the team's code, as the pipeline is. A copy of the refund_desk example whose double
first runs tests/hostile/hostile_probe.py (the seal key, the store, the run root, another run's
directory, SABOT_VAR, the harness's /proc, writes outside its directory) and hands its findings
back in its error: every attempt is denied, the run is a RUN_ERROR naming the double, and nothing
outside changed. A double that fails while answering fails its run naming its file and line.
"""

import json
import os
import shutil
from pathlib import Path

from sabot import seal
from sabot.projects import Project

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "hostile" / "hostile_probe.py"
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
PROBING_DOUBLE = """

def make_responder(seed):
    import hostile_probe
    from pathlib import Path

    raise RuntimeError("probe report " + json.dumps(hostile_probe.probe(Path(__file__).resolve().parent)))
"""
FAILING_DOUBLE = """

_working_make_responder = make_responder


def make_responder(seed):
    def respond(request):
        return 1 / 0

    return respond
"""


def _project(tmp_path: Path, double_code: str) -> Path:
    project = tmp_path / "refund_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", project, ignore=shutil.ignore_patterns("__pycache__"))
    with (project / "refund_double.py").open("a") as double:
        double.write(double_code)
    return project


QUICK_POLICY = {
    "retry": {
        "max_attempts": 2,
        "max_total_seconds": 5,
        "initial_backoff_seconds": 0.05,
        "max_backoff_seconds": 0.1,
        "jitter_seconds": 0.01,
        "max_retry_after_seconds": 1,
        "retry_on_status": [429, 500, 502, 503, 504],
    },
    "call_timeout_seconds": 10,
    "run_wall_limit_seconds": 120,
    "limits": {},
}  # a failing double's 500 retried once, not for half a minute


def _run(project: Path, tmp_path: Path):
    from adapters.byo.runner import run_project
    from adapters.gateway import CallPolicy
    from adapters.runner import RunSpec

    policy = CallPolicy.from_doc(QUICK_POLICY, "a quick retry")
    spec = RunSpec("refund_desk", 1, "langgraph", "own", "refund", None, 1)
    return run_project(spec, Project.load(project), tmp_path / "runs", call_policy=policy).record


def test_a_hostile_test_double_reaches_nothing_of_the_harness(tmp_path, monkeypatch):
    project, var = _project(tmp_path, PROBING_DOUBLE), tmp_path / "var"
    shutil.copyfile(PROBE, project / PROBE.name)
    other = var / "runs" / "refund_desk" / "another-run"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another run's work")
    seal.store_key(var / "runroot")
    monkeypatch.setenv("SABOT_VAR", str(var))
    (project / "targets.json").write_text(
        json.dumps({"var": str(var), "other_attempt": str(other), "harness": str(ROOT), "harness_pid": os.getpid()})
    )
    var_before = sorted(p.relative_to(var).as_posix() for p in var.rglob("*"))

    record = _run(project, tmp_path)
    assert record.error and record.error.startswith(
        "test double refund_double:make_responder failed at refund_double.py:"
    ), record.error
    report = json.loads(record.error.split("probe report ", 1)[1])
    assert {name: report[name] for name in DENIED if not report[name].startswith("denied: ")} == {}
    assert report["list SABOT_VAR"] == "got: []" and report["SABOT_VAR in the environment"] is None
    assert report["harness settings in the environment"] == []
    assert len(report["processes seen"]) <= 3 and os.getpid() not in report["processes seen"], report["processes seen"]
    assert sorted(p.relative_to(var).as_posix() for p in var.rglob("*")) == var_before
    assert not any(p.exists() for p in (project / "planted.txt", var / "planted.txt", ROOT / "planted.txt"))


def test_a_test_double_failing_while_it_answers_fails_its_run_naming_its_line(tmp_path):
    record = _run(_project(tmp_path, FAILING_DOUBLE), tmp_path)
    assert record.error and record.error.startswith(
        "test double refund_double:make_responder failed at refund_double.py:"
    ), record.error
    assert "in respond: ZeroDivisionError: division by zero" in record.error and "attempt" not in record.error
