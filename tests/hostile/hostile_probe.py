"""What a hostile pipeline tries before doing its job: reach the evidence and the harness's secrets.

Copied into a project folder by tests/test_confinement.py, beside a `targets.json` naming where the
harness keeps things (as anyone who read the project's docs would know). Every attempt is written to
`hostile_report.json` in the working directory: "denied: <error>" when it failed, else what it got.
"""

import json
import os
from pathlib import Path


def _attempt(report: dict, name: str, action) -> None:
    try:
        report[name] = f"got: {action()!r}"[:400]
    except Exception as exc:  # the outcome wanted: the sandbox refused
        report[name] = f"denied: {type(exc).__name__}"


def probe(folder: Path) -> dict:
    return probe_targets(json.loads((folder / "targets.json").read_text()), folder)


def probe_targets(targets: dict, folder: Path) -> dict:
    """`folder`: the code the pipeline runs from (a project folder, or the harness's own tree)."""
    var = Path(targets["var"])
    report: dict = {}
    _attempt(report, "read the seal key", lambda: (var / "seal.key").read_bytes())
    _attempt(report, "read the store", lambda: (var / "sabot.duckdb").read_bytes()[:16])
    _attempt(report, "list the run root", lambda: os.listdir(var / "runroot"))
    _attempt(
        report, "read another attempt's directory", lambda: (Path(targets["other_attempt"]) / "secret.txt").read_text()
    )
    _attempt(report, "list SABOT_VAR", lambda: [n for n in os.listdir(var) if n != "runs"])
    _attempt(
        report, "write outside the work directory (project folder)", lambda: (folder / "planted.txt").write_text("x")
    )
    _attempt(report, "write outside the work directory (SABOT_VAR)", lambda: (var / "planted.txt").write_text("x"))
    _attempt(
        report,
        "write outside the work directory (harness code)",
        lambda: (Path(targets["harness"]) / "planted.txt").write_text("x"),
    )
    report["SABOT_VAR in the environment"] = os.environ.get("SABOT_VAR")
    report["harness settings in the environment"] = sorted(
        k for k in os.environ if k.startswith(("SABOT_", "DAGSTER_"))
    )
    parent = Path(f"/proc/{os.getppid()}/environ")
    _attempt(
        report,
        "the parent's environment",
        lambda: [v.split("=")[0] for v in parent.read_bytes().split(b"\0") if v.startswith(b"SABOT_")],
    )
    _attempt(report, "the harness's process", lambda: Path(f"/proc/{targets['harness_pid']}/environ").read_bytes()[:40])
    report["processes seen"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    Path("hostile_report.json").write_text(json.dumps(report, indent=1))
    return report
