"""Where the file server beside the UI answers, as the asset metadata links it.

One address for every command that builds an asset (the CLI, the UI, the daemon): `SABOT_REPORTS_URL`
when set, else http://127.0.0.1:3010, where `scripts/ui.sh` starts the server by default. A link
is therefore an http link from the first command-line wave on, never a `file://` address the
browser refuses from the UI.

    /reports/<wave>/...            the report files (var/reports)
    /runs/<attempt directory>/     a sealed run record, its seal checked (var/runroot)
        events, exchanges, exchanges/<n>, raw/<file>
    /ui/<path>                     the Dagster UI's page <path> (pages served here link back through it)
"""

import os
from pathlib import Path
from urllib.parse import quote

FILES_URL_ENV = "SABOT_REPORTS_URL"
DEFAULT_FILES_URL = "http://127.0.0.1:3010"
REPORTS, RUNS, UI = "reports", "runs", "ui"


def files_url() -> str:
    return (os.environ.get(FILES_URL_ENV) or DEFAULT_FILES_URL).rstrip("/")


def report_url(relative: str | Path) -> str:
    """A file under the reports directory, by its path relative to that directory."""
    return f"{files_url()}/{REPORTS}/{quote(Path(relative).as_posix())}"


def attempt_dir_of(source_path: str) -> str:
    """The attempt directory (relative to the run root) of a live run file's `source_path`."""
    return source_path.rsplit("/", 1)[0]


def record_url(source_path: str, page: str = "") -> str:
    """A live run's sealed record: its overview, or one of its pages (`events`, `exchanges`, `exchanges/<n>`)."""
    return f"{files_url()}/{RUNS}/{quote(attempt_dir_of(source_path))}/{page}"
