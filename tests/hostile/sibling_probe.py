"""Run inside the sandbox by tests/test_confined_isolation.py: isolate as a run's child does, then try
to reach a sibling run's scratch directory. Prints one JSON report."""

import ctypes
import json
import os
import sys
from pathlib import Path

from adapters.confined_isolation import isolate_run


def attempt(action):
    try:
        return f"got: {action()!r}"
    except Exception as exc:
        return f"denied: {type(exc).__name__}"


area, cover, mine, sibling = map(Path, sys.argv[1:5])
isolate_run(area, area / mine.name, cover)
libc = ctypes.CDLL(None, use_errno=True)
report = {
    "the scratch area": sorted(os.listdir(area)),
    "own scratch": sorted(os.listdir(".")),
    "a sibling's file": attempt(lambda: (sibling / "secret.txt").read_text()),
    "unmount the cover": "denied" if libc.umount2(str(area).encode(), 2) != 0 else "got: unmounted",
    "write own scratch": attempt(lambda: Path("out.txt").write_text("mine")),
}
print(json.dumps(report))
