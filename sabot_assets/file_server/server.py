"""The file server beside the Dagster UI: read-only, on 127.0.0.1 (started by scripts/ui.sh).

It answers the addresses of `addresses`: report files from the store's `reports` directory, run
records from its run root (rendered by `record_pages`), and `/ui/...` as a redirect to the
Dagster UI, so a page served here links a cell's partition whatever port the UI listens on.
A request it cannot answer gets one line naming what is missing.
"""

import http.server
import mimetypes
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sabot_assets.file_server.addresses import REPORTS, RUNS, UI
from sabot_assets.file_server.record_pages import RecordPages, page

RECORD_PAGES = {"": "overview", "events": "events", "exchanges": "exchanges"}


class FileHandler(http.server.BaseHTTPRequestHandler):
    store_dir: Path  # set by `handler_for`
    ui_url: str

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = unquote(urlsplit(self.path).path)
        parts = path.strip("/").split("/", 1)
        head, rest = parts[0], (parts[1] if len(parts) > 1 else "")
        try:
            if head == UI:
                self._redirect(
                    f"{self.ui_url.rstrip('/')}/{rest}"
                    + (f"?{urlsplit(self.path).query}" if urlsplit(self.path).query else "")
                )
            elif head == REPORTS:
                self._file(self.store_dir / "reports", rest)
            elif head == RUNS:
                self._record(rest)
            elif head == "":
                self._send(
                    200,
                    page(
                        "Sabot files", f"<p><a href='/{REPORTS}/'>reports</a> · <a href='/{UI}/'>the Dagster UI</a></p>"
                    ),
                )
            else:
                raise FileNotFoundError(f"nothing is served at {path} (served: /{REPORTS}/, /{RUNS}/, /{UI}/)")
        except FileNotFoundError as exc:
            self._send(404, page("Not found", f"<p>{exc}</p>"))

    def _record(self, rest: str) -> None:
        """runs/<attempt dir>/[events|exchanges|exchanges/<n>|raw/<file>]: the attempt dir is 7 parts deep."""
        parts = rest.strip("/").split("/")
        attempt, tail = "/".join(parts[:7]), parts[7:]
        pages = RecordPages(self.store_dir / "runroot", attempt)
        if len(tail) <= 1 and (tail[0] if tail else "") in RECORD_PAGES:
            self._send(200, getattr(pages, RECORD_PAGES[tail[0] if tail else ""])())
        elif len(tail) == 2 and tail[0] == "exchanges" and tail[1].isdigit():
            self._send(200, pages.exchange(int(tail[1])))
        elif len(tail) == 2 and tail[0] == "raw":
            self._send(200, pages.raw(tail[1]), "text/plain; charset=utf-8")
        else:
            raise FileNotFoundError(
                f"no page {'/'.join(tail)!r} of runs/{attempt} (pages: events, exchanges, exchanges/N, raw/FILE)"
            )

    def _file(self, root: Path, relative: str) -> None:
        target = (root / relative).resolve()
        if target.is_dir():
            target = target / "index.html"
        if root.resolve() not in target.parents or not target.is_file():
            raise FileNotFoundError(f"no file {REPORTS}/{relative}")
        kind = mimetypes.guess_type(target.name)[0] or "text/plain"
        kind = "text/plain" if kind == "text/markdown" else kind  # shown in the browser, not downloaded
        self._send(200, target.read_bytes(), f"{kind}; charset=utf-8" if kind.startswith("text/") else kind)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.end_headers()

    def _send(self, status: int, body: str | bytes, kind: str = "text/html; charset=utf-8") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 (http.server's signature): quiet beside the UI's own log
        pass


def handler_for(store_dir: Path, ui_url: str) -> type[FileHandler]:
    return type("BoundFileHandler", (FileHandler,), {"store_dir": Path(store_dir), "ui_url": ui_url})


def serve(store_dir: Path, port: int, ui_url: str) -> http.server.ThreadingHTTPServer:
    """Start serving in a daemon thread; returns the server (its `shutdown` stops it)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler_for(store_dir, ui_url))
    threading.Thread(target=server.serve_forever, name="sabot-files", daemon=True).start()
    return server
