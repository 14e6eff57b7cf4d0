"""One confined fork server per command: where every built-in row's pipeline code runs.

A fresh interpreter per run would pay the agent frameworks' imports each time (8-13 s); a fork
server outside the sandbox would hand every run the harness's memory. So the server itself is
started once inside the bubblewrap sandbox of `adapters.confinement` (own user, PID, IPC and UTS
namespaces, the harness's paths masked, an environment without SABOT_*/DAGSTER_* settings or
secrets), imports the frameworks there once, and forks one child per run: a child runs one
pipeline and exits (CrewAI's event bus, AutoGen's trace logger and the per-run HOME are
process-global, as in `adapters.pool`).

The harness's run process reaches it over a Unix socket whose path lies in a directory the
sandbox never sees (the listening socket is handed to the server as an open descriptor). A run
sends a pickled `PipelineRequest` (harness to sandbox: the trusted direction) and reads back the
child's JSON answer (`adapters.confined_pipeline`); the child's scratch directory lies in the
server's writable scratch area, made by the harness before the request. The child exits when the
harness's side of its connection closes (the run killed), and with the server; the server, as
bwrap's command, dies with the process that started it (`--die-with-parent`).
"""

import atexit
import json
import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

from adapters.confinement import confined_command, confined_environment
from adapters.endpoint import API_KEY_ENV

CONFINED_PRELOAD_ENV = "SABOT_CONFINED_PRELOAD"  # set by adapters.pool: the pipelines' modules the server imports once
LENGTH = struct.Struct("!Q")
BACKLOG = 64
STARTUP_SECONDS = 120.0  # the framework imports, on a loaded machine


class ConfinedServerGone(RuntimeError):
    """The confined fork server could not be reached, or a run's child ended without an answer."""


def secrets_of(environ) -> tuple[str, ...]:
    return tuple(v for v in (environ.get(API_KEY_ENV),) if v)


def sandbox_environment(environ) -> dict:
    """What the sandbox starts with: the harness's settings and anything holding a secret removed."""
    from adapters.byo.confine import scrubbed_environment

    return confined_environment(scrubbed_environment(dict(environ), secrets_of(environ)))


class _Server:
    lock = threading.Lock()
    process: subprocess.Popen | None = None
    owner = 0  # the pid that started it: a process forked from the owner uses it, never restarts it
    address = ""
    scratch: Path | None = None
    covers: Path | None = None  # read-only in the sandbox: one empty cover per run (adapters.confined_isolation)


def start(modules: list[str]) -> None:
    """Start the confined server (if this process has none), preloading `modules`; returns at once."""
    with _Server.lock:
        if _Server.process is not None and _Server.owner == os.getpid() and _Server.process.poll() is None:
            return
        # One 0700 directory per server: its socket beside (never inside) the two trees the sandbox sees.
        private = Path(tempfile.mkdtemp(prefix="sabot-confined-"))
        scratch, covers = private / "scratch", private / "covers"
        scratch.mkdir()
        covers.mkdir()
        address = str(private / "server.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(address)
            listener.listen(BACKLOG)
            bootstrap = (
                "import json, sys\n"
                "sys.path[:0] = json.loads(sys.argv[1])\n"
                "from adapters.confined_server import serve\n"
                "serve(int(sys.argv[2]), json.loads(sys.argv[3]))\n"
            )
            argv = [
                sys.executable,
                "-c",
                bootstrap,
                json.dumps(list(sys.path)),
                str(listener.fileno()),
                json.dumps(list(modules)),
            ]
            command = confined_command(argv, scratch, [covers])
            # Its own session: a terminal's Ctrl-C reaches the command, which decides what ends; never the sandbox first.
            process = subprocess.Popen(
                command,
                env=sandbox_environment(os.environ),
                stdin=subprocess.DEVNULL,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
            )
        finally:
            listener.close()
        atexit.register(_remove_if_owner, os.getpid(), private)
        _Server.process, _Server.owner, _Server.address, _Server.scratch, _Server.covers = (
            process,
            os.getpid(),
            address,
            scratch,
            covers,
        )


def _remove_if_owner(owner: int, private: Path) -> None:
    if os.getpid() == owner:  # a process forked from the owner never removes what the owner still serves
        shutil.rmtree(private, ignore_errors=True)


def run_in_sandbox(request, run_dir_name: str, modules: list[str]) -> tuple[bytes, Path]:
    """Run `request` (a PipelineRequest without its run_dir) in a child of the confined server; the
    child's raw answer and its scratch directory (the caller copies what it needs, then removes it)."""
    if not _Server.address:
        start(modules)
    import dataclasses

    name = f"{run_dir_name}-{uuid.uuid4().hex[:8]}"
    scratch, cover = _Server.scratch / name, _Server.covers / name
    scratch.mkdir()
    (cover / name).mkdir(parents=True)
    try:
        return _exchange(dataclasses.replace(request, run_dir=str(scratch), cover=str(cover))), scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(cover, ignore_errors=True)


def _exchange(request) -> bytes:
    import time

    deadline = time.monotonic() + STARTUP_SECONDS
    while True:  # the server may still be importing the frameworks: its backlog accepts at once
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(_Server.address)
            break
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            conn.close()
            alive = _Server.owner != os.getpid() or (_Server.process is not None and _Server.process.poll() is None)
            if not alive or time.monotonic() > deadline:
                raise ConfinedServerGone(
                    f"the confined pipeline server at {_Server.address} is not running ({exc})"
                ) from None
            time.sleep(0.05)
    with conn:
        _send(conn, pickle.dumps(request))
        answer = _receive(conn)
    if answer is None:
        raise ConfinedServerGone(
            "the pipeline's confined process ended without an answer (killed, or it exited on its own)"
        )
    return answer


def _send(conn: socket.socket, data: bytes) -> None:
    conn.sendall(LENGTH.pack(len(data)) + data)


def _receive(conn: socket.socket) -> bytes | None:
    head = _read_exactly(conn, LENGTH.size)
    if head is None:
        return None
    return _read_exactly(conn, LENGTH.unpack(head)[0])


def _read_exactly(conn: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# Inside the sandbox.


def serve(listen_fd: int, modules: list[str]) -> None:
    """The server's loop: preload, then one forked child per connection, for as long as it lives."""
    import gc
    import importlib

    import ctypes

    from adapters.confined_isolation import PR_SET_DUMPABLE

    listener = socket.socket(fileno=listen_fd)
    os.chdir("/")  # not the scratch area: a child could reach every run's scratch through /proc/<server>/cwd
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # its /proc entries closed to the runs it forks
    from adapters import confined_pipeline  # noqa: F401  (what every child runs)

    for module in modules:
        importlib.import_module(module)
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves: no zombies, no waiting
    gc.freeze()  # children share the preloaded heap copy-on-write; the collector need not walk it
    while True:  # one spare child always forked ahead, waiting on the socket: a run never waits for the fork
        accepted_r, accepted_w = os.pipe()
        if os.fork() == 0:
            os.close(accepted_r)
            conn, _ = listener.accept()
            listener.close()
            os.close(accepted_w)  # the server forks the next spare now
            _child(conn)
        os.close(accepted_w)
        os.read(accepted_r, 1)  # b"" once the spare took a connection (or died): fork the next
        os.close(accepted_r)


def _warm() -> None:
    """What each child would otherwise compute on first use (as adapters.fork_ready does for the harness)."""
    import importlib
    import linecache

    from adapters import prompts
    from adapters.outcome import infrastructure_errors
    from adapters.warm_clients import CLIENT_MODULES, build_response_models, resolve_request_types
    from sabot import plugins

    for module in (*CLIENT_MODULES, "adapters.tools", "operators", "sabot.tasks"):  # what run_pipeline uses
        importlib.import_module(module)
    infrastructure_errors()
    build_response_models()
    resolve_request_types()
    plugins.load_entry_points()
    prompts.reviewer_addendum()
    for name, module in list(sys.modules.items()):
        if name.startswith("adapters.") and name.endswith("_pipeline") and getattr(module, "__file__", None):
            linecache.getlines(module.__file__)  # LangGraph reads its nodes' source when it compiles


def _child(conn: socket.socket) -> None:
    from adapters.confined_isolation import isolate_run
    from adapters.confined_pipeline import run_pipeline
    from adapters.parent_watch import die_with_parent

    code = 0
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the pipeline's own subprocesses are waited for as usual
        data = _receive(conn)
        if data is None:
            os._exit(0)
        request = pickle.loads(data)
        isolate_run(
            Path(request.run_dir).parent, Path(request.run_dir), Path(request.cover)
        )  # single-threaded still, as unshare(2) needs
        die_with_parent()  # after it: a change of credentials clears the parent-death signal
        threading.Thread(target=_exit_when_closed, args=(conn.dup(),), name="harness-watch", daemon=True).start()
        os.environ.clear()
        os.environ.update(request.environ)
        answer = run_pipeline(request).to_json()
    except (
        BaseException
    ) as exc:  # the set-up failed (the pipeline's own errors are in its result): said, never run unconfined
        answer, code = json.dumps({"failure": f"{type(exc).__name__}: {exc}"}).encode(), 70
    try:
        _send(conn, answer)
    finally:
        os._exit(code)  # no atexit handlers, no flushing of the server's buffers a second time


def _exit_when_closed(conn: socket.socket) -> None:
    """The harness's run process gone (killed, or its wall limit): this run stops too."""
    try:
        while conn.recv(1):
            pass
    except OSError:
        pass
    os._exit(1)
