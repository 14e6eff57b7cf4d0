"""Runs in flight inside the one confined server cannot reach each other (adapters/confined_isolation.py).

A process inside a real bubblewrap sandbox, set up as the server's children are, lists the shared
scratch area, reads a sibling run's file and tries to undo its cover: it sees only its own
directory, reads nothing of the sibling's, and cannot unmount what hides them.
"""

import json
import subprocess
import sys
from pathlib import Path

from adapters.confinement import confined_command

PROBE = Path(__file__).with_name("hostile") / "sibling_probe.py"


def test_a_run_sees_only_its_own_scratch_directory(tmp_path):
    area, covers = tmp_path / "scratch", tmp_path / "covers"
    mine, sibling = area / "run-a", area / "run-b"
    for directory in (mine, sibling, covers / "run-a" / "run-a"):
        directory.mkdir(parents=True)
    (sibling / "secret.txt").write_text("the other run's work")
    command = confined_command(
        [sys.executable, str(PROBE), str(area), str(covers / "run-a"), str(mine), str(sibling)], area, [covers]
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["the scratch area"] == ["run-a"], report
    assert report["a sibling's file"].startswith("denied: "), report
    assert report["unmount the cover"] == "denied", report
    assert report["write own scratch"].startswith("got: "), report
    assert (mine / "out.txt").read_text() == "mine" and sorted(p.name for p in sibling.iterdir()) == ["secret.txt"]
