"""A run for the parent-death test: reports its pid and its fork server's, then waits to be killed."""

import json
import os
import time
from pathlib import Path


def sleep_and_report(report: str) -> None:
    Path(report + ".tmp").write_text(json.dumps({"run": os.getpid(), "fork_server": os.getppid()}))
    os.replace(report + ".tmp", report)
    time.sleep(120)
