"""Run `dagster dev` and the read-only file server beside it, and stop both together.

Started by scripts/ui.sh. The assets link their files, run records and number pages through the
file server (the Dagster UI serves no files), at SABOT_REPORTS_URL (`sabot_assets.file_server`). A background job of a script inherits SIGINT
as ignored and `dagster dev` turns SIGTERM into its SIGINT handling, so SIGINT is reset here, and
SIGINT or SIGTERM to this process is passed on to `dagster dev` as SIGINT.

usage: ui_supervisor.py STORE_DIR FILES_PORT UI_URL -- COMMAND...
"""

import signal
import subprocess
import sys
from pathlib import Path

from sabot_assets.file_server.server import serve


def main(argv: list[str]) -> int:
    store_dir, port, ui_url, sep, *command = argv
    if sep != "--" or not command:
        raise SystemExit(__doc__)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the child inherits the default, not "ignored"
    serve(Path(store_dir), int(port), ui_url)
    child = subprocess.Popen(command)
    stop = lambda signum, frame: child.send_signal(signal.SIGINT)  # noqa: E731
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
