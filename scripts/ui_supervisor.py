"""Run `dagster dev` and a read-only file server for the reports, and stop both together.

Started by scripts/ui.sh. The report assets link their full files through the file server (the
Dagster UI cannot serve files), at SABOT_REPORTS_URL. A background job of a script inherits SIGINT
as ignored and `dagster dev` turns SIGTERM into its SIGINT handling, so SIGINT is reset here, and
SIGINT or SIGTERM to this process is passed on to `dagster dev` as SIGINT.

usage: ui_supervisor.py REPORTS_DIR REPORTS_PORT -- COMMAND...
"""

import functools
import http.server
import signal
import subprocess
import sys
import threading
from pathlib import Path


def serve_reports(root: Path, port: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, name="reports", daemon=True).start()


def main(argv: list[str]) -> int:
    root, port, sep, *command = argv
    if sep != "--" or not command:
        raise SystemExit(__doc__)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the child inherits the default, not "ignored"
    serve_reports(Path(root), int(port))
    child = subprocess.Popen(command)
    stop = lambda signum, frame: child.send_signal(signal.SIGINT)  # noqa: E731
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
