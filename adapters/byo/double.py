"""A team's test double, served from a confined process of its own, never from the run's process.

The double (project.json "responder") is the team's code, as the pipeline is: it runs in a
bubblewrap sandbox (adapters.confinement) in a fresh interpreter that sees its project folder
read-only and a scratch directory of its own, never the store, the run root, SABOT_VAR or the seal
key. The harness binds the loopback socket and hands it in, so the port the gateway forwards to is
the harness's choice, and the double only ever answers on it: the scripted model's HTTP
(adapters.scripted.server) around the team's `respond(request)`. Back on a pipe come JSON lines
only: "ready", and the double's first failure as text (the run's error, as the pipeline's own
failures are). Nothing it sends is unpickled.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from adapters.byo.confine import scrubbed_environment
from adapters.byo.errors import TeamCodeError, team_code_error
from adapters.confinement import ConfinementUnavailable, confined_command, confined_environment
from adapters.endpoint import API_KEY_ENV
from adapters.scripted.reply import Reply, ToolCall
from sabot.projects import Project, ProjectError

LINE_LIMIT = 8000  # characters of one report line read; a double's error is cut there
BACKLOG = 64

BOOTSTRAP = (
    "import json, sys\n"
    "sys.path[:0] = json.loads(sys.argv[1])\n"
    "from adapters.byo.double import serve_double\n"
    "serve_double(*sys.argv[2:5], *map(int, sys.argv[5:8]))\n"
)


def as_reply(answer) -> Reply:
    """A test double's answer (text, or {"content"|"tool_calls"|"model"}) as the scripted server's Reply."""
    if isinstance(answer, str):
        return Reply(content=answer)
    if isinstance(answer, dict):
        calls = tuple(
            ToolCall(c["name"], c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]))
            for c in answer.get("tool_calls", ())
        )
        return Reply(content=answer.get("content"), tool_calls=calls, model=answer.get("model"))
    raise TypeError(f"a test double answers with text or a dict, not {type(answer).__name__}")


class ConfinedDouble:
    """The project's test double serving on a loopback port (`base_url`) from its own sandbox.
    Its failure at start is raised at once; a failure while answering (the pipeline only sees the
    500) by `raise_if_failed`, which ends the double first so every line it wrote is read."""

    def __init__(self, project: Project, seed: int, startup_seconds: float):
        self.project, self.seed, self.startup_seconds = project, seed, startup_seconds
        self.target = project.doc["responder"]
        self.error: str | None = None
        self.child: subprocess.Popen | None = None
        self._ready, self._reader, self._scratch = threading.Event(), None, None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "ConfinedDouble":
        listener = socket.create_server(("127.0.0.1", 0), backlog=BACKLOG)
        self.port = listener.getsockname()[1]
        read_end, write_end = os.pipe()
        self._scratch = Path(tempfile.mkdtemp(prefix="sabot-double-"))
        fds = (listener.fileno(), write_end)
        argv = [
            sys.executable,
            "-c",
            BOOTSTRAP,
            json.dumps(sys.path),
            str(self.project.root),
            self.project.name,
            self.target,
            str(self.seed),
            *map(str, fds),
        ]
        try:
            command = confined_command(argv, self._scratch, [self.project.root])
            provider_key = os.environ.get(API_KEY_ENV, "")  # set even offline (a check): no variable holding it goes in
            environment = {
                **confined_environment(scrubbed_environment(dict(os.environ), (provider_key,))),
                "HOME": str(self._scratch),
            }
            self.child = subprocess.Popen(
                command,
                env=environment,
                stdin=subprocess.DEVNULL,
                close_fds=True,
                pass_fds=fds,
                start_new_session=True,
                cwd=self._scratch,
            )
        except ConfinementUnavailable as exc:  # never run unconfined: the run is refused, naming the missing tool
            os.close(read_end)
            self.stop()
            raise ProjectError(str(exc)) from None
        except BaseException:
            os.close(read_end)
            self.stop()
            raise
        finally:
            os.close(write_end)
            listener.close()  # the sandbox holds it now: the port stays the double's until it ends
        self._reader = threading.Thread(target=self._read, args=(read_end,), daemon=True)
        self._reader.start()
        if not self._ready.wait(self.startup_seconds) or self.error:
            self.stop()
            raise TeamCodeError(
                self.error or f"test double {self.target} did not start serving within {self.startup_seconds:g} s"
            )
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, encoding="utf-8", errors="replace") as source:
            while line := source.readline(LINE_LIMIT):
                try:
                    said = json.loads(line)
                except ValueError:
                    continue  # not a report line: ignored, never acted on
                if isinstance(said, dict) and isinstance(said.get("error"), str) and self.error is None:
                    self.error = said["error"][:LINE_LIMIT]
                if isinstance(said, dict) and (said.get("ready") is True or "error" in said):
                    self._ready.set()
        if self.error is None and not self._ready.is_set():
            self.error = (
                f"test double {self.target}: its process ended before it served (killed, or it exited on its own)"
            )
        self._ready.set()

    def raise_if_failed(self) -> None:
        self.stop()
        if self.error is not None:
            raise TeamCodeError(self.error)

    def stop(self) -> None:
        if self.child is not None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)  # the sandbox and whatever the double started in it
            except (ProcessLookupError, PermissionError):
                pass
            self.child.wait()
        if self._reader is not None:
            self._reader.join(5)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def serve_double(root: str, name: str, target: str, seed: int, listening_fd: int, report_fd: int) -> None:
    """The sandbox's side: the team's double built with `seed`, answering on the socket it was handed."""
    from sabot.plugins import resolve_path
    from adapters.scripted.server import ScriptedModelServer

    report, lock, what = os.fdopen(report_fd, "w", buffering=1), threading.Lock(), f"test double {target}"
    failed: list[str] = []

    def fail(exc: Exception) -> str:
        with lock:
            if not failed:
                failed.append(str(team_code_error(what, exc, Path(root))))
                report.write(json.dumps({"error": failed[0]}) + "\n")
            return failed[0]

    sys.path.insert(0, root)
    try:
        respond = resolve_path(target, f"{name}: responder")(seed)
    except Exception as exc:
        fail(exc)
        os._exit(0)

    def answer(request: dict) -> Reply:
        try:
            return as_reply(respond(request))
        except Exception as exc:
            return Reply(status=500, error=fail(exc))

    ScriptedModelServer(answer, listening=socket.socket(fileno=listening_fd)).start()
    report.write(json.dumps({"ready": True}) + "\n")
    threading.Event().wait()  # served until the harness ends the sandbox
