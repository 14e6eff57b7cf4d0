"""The process a team's pipeline runs in: confined, without the provider's key, on a wall limit.

The run's own process hosts the model gateway (which alone holds the provider key) and the fault
layer in front of it; the team's code (factory, pipeline, tools, pass criterion) runs in a fresh
interpreter inside a bubblewrap sandbox (`adapters.confinement`): its own user and PID namespaces,
seeing only the system, the Python environment, its project folder (read-only) and the run's
scratch directory, never the store, the run root, SABOT_VAR or the seal key, nor any other
process's /proc. Its environment has the credentials and the harness's settings removed and the
OpenAI SDK pointed at the fault layer with a placeholder key. The work reaches it as pickled data
(module, function, arguments), never as inherited memory, and its result comes back over a
pipe as JSON, parsed as data: never unpickled, since the bytes come from the scored party's process
and unpickling them would run whatever it chose, in the harness. Past the wall limit the sandbox is killed (its PID namespace with it: whatever the pipeline
started ends too); its Python stack, dumped by faulthandler just before, names where in the
project's code it was.

Every run pays a fresh interpreter and its imports (the framework included): the price of a
process that never shared memory with the harness.
"""

import contextlib
import faulthandler
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from adapters.confinement import confined_command, confined_environment, confined_pids
from adapters.endpoint import API_KEY_ENV, BASE_URL_ENV

STACK_GRACE_SECONDS = 0.5  # for faulthandler to write the hung child's stack before it is killed
ANSWER_LIMIT_BYTES = 64 << 20  # far above any run's events and output; a larger answer is refused, not parsed
FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)')


class WallLimitExceeded(TimeoutError):
    """The child ran past its wall limit and was killed; `where` is its innermost frame in `root` (if any)."""

    def __init__(self, seconds: float, where: str | None):
        super().__init__(f"ran past its wall limit of {seconds:g} s")
        self.seconds, self.where = seconds, where


class ChildDied(RuntimeError):
    """The child ended without handing back a result (killed by a signal, or os._exit from its code)."""


class AnswerRefused(ChildDied):
    """What the child handed back is not an answer of the expected form (not JSON, too large, or a
    field of the wrong shape): read as data only, refused, nothing in it run."""


def scrubbed_environment(environ: dict, secrets: tuple[str, ...]) -> dict:
    """The environment without the provider's settings or any entry whose value holds a secret."""
    return {
        k: v
        for k, v in environ.items()
        if k not in (API_KEY_ENV, BASE_URL_ENV) and not any(s and s in v for s in secrets)
    }


def run_confined(
    work: Callable[[], object],
    wall_seconds: float,
    root: Path,
    secrets: tuple[str, ...] = (),
    scratch: Path | None = None,
):
    """`work()` (picklable) in a confined fresh interpreter that sees `root` read-only and `scratch`
    (default: a temporary directory) read-write, with the secrets gone from its environment; its
    return value (as JSON: lists for tuples and sets), or its exception re-raised here as
    `ChildFailed` text; anything else it sends is `AnswerRefused`. Past
    `wall_seconds`: WallLimitExceeded, naming the innermost frame of the child inside `root`."""
    read_end, write_end = os.pipe()
    stack = tempfile.TemporaryFile()
    with contextlib.ExitStack() as cleanup:
        if scratch is None:
            scratch = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="sabot-pipeline-")))
        Path(scratch).mkdir(parents=True, exist_ok=True)  # bwrap binds only what exists
        try:
            child = _spawned(work, write_end, stack, secrets, root, scratch)
        except BaseException:
            os.close(read_end)
            stack.close()
            raise
        finally:
            os.close(write_end)
        received = bytearray()
        reader = threading.Thread(target=_drain, args=(read_end, received, ANSWER_LIMIT_BYTES), daemon=True)
        reader.start()
        try:
            reader.join(wall_seconds)
            if reader.is_alive():  # hung: its stack first, then the whole sandbox
                where = _stack_of(child.pid, stack, root)
                _kill_group(child.pid)
                reader.join(5)
                raise WallLimitExceeded(wall_seconds, where)
            _kill_group(child.pid)  # whatever the pipeline left running in its sandbox ends with it
        except BaseException:  # interrupted (Ctrl-C, a signal raised as SystemExit): its sandbox ends with the command
            _kill_group(child.pid)
            raise
        finally:
            child.wait()
            stack.close()
    if not received:
        raise ChildDied("the pipeline's process ended without a result (killed, or it exited on its own)")
    return answer_of(bytes(received))


def answer_of(data: bytes):
    """The child's answer, parsed as JSON and nothing else: {"ok": value} gives the value,
    {"error": [type, message, traceback]} raises ChildFailed, anything else AnswerRefused."""
    if len(data) > ANSWER_LIMIT_BYTES:
        raise AnswerRefused(f"the pipeline's process handed back more than {ANSWER_LIMIT_BYTES} bytes: refused unread")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, or nested past the parser's depth
        raise AnswerRefused(
            f"the pipeline's process handed back {len(data)} bytes that are not a JSON answer "
            f"({type(exc).__name__}: {str(exc)[:200]}); nothing in them was run"
        ) from None
    if isinstance(doc, dict) and list(doc) == ["ok"]:
        return doc["ok"]
    error = doc.get("error") if isinstance(doc, dict) and list(doc) == ["error"] else None
    if isinstance(error, list) and len(error) == 3 and all(isinstance(part, str) for part in error):
        raise ChildFailed(tuple(error))
    raise AnswerRefused(
        'the pipeline\'s process handed back JSON that is neither {"ok": value} nor {"error": [type, message, traceback]}'
    )


class ChildFailed(Exception):
    """An exception in the child, as (type name, message, traceback text): it crossed a process boundary."""

    def __init__(self, detail: tuple[str, str, str]):
        super().__init__(f"{detail[0]}: {detail[1]}")
        self.kind, self.message, self.trace = detail


# The fresh interpreter's first lines: the run's import path (a list of str, first in the work file),
# then the rest is served by this module.
BOOTSTRAP = (
    "import os, pickle, sys\n"
    "source = os.fdopen(int(sys.argv[1]), 'rb')\n"
    "sys.path[:0] = pickle.load(source)\n"
    "from adapters.byo.confine import serve_spawned\n"
    "serve_spawned(source, int(sys.argv[2]), int(sys.argv[3]))\n"
)


def _spawned(
    work: Callable[[], object], write_end: int, stack, secrets: tuple[str, ...], root: Path, scratch: Path
) -> subprocess.Popen:
    data = pickle.dumps(work)
    if any(s and s.encode() in data for s in secrets):
        raise ValueError("the work handed to the pipeline's process holds a secret it must not see")
    source = tempfile.TemporaryFile()
    with source:
        pickle.dump(list(sys.path), source)
        source.write(data)
        source.flush()
        source.seek(0)
        fds = (source.fileno(), write_end, stack.fileno())
        command = confined_command([sys.executable, "-c", BOOTSTRAP, *map(str, fds)], Path(scratch), [Path(root)])
        environment = confined_environment(scrubbed_environment(dict(os.environ), secrets))
        return subprocess.Popen(
            command, env=environment, stdin=subprocess.DEVNULL, close_fds=True, pass_fds=fds, start_new_session=True
        )


def serve_spawned(source, write_end: int, stack_fd: int) -> None:
    """The fresh interpreter's side: the pickled work read from `source`, run, answered on `write_end`."""
    _serve(lambda: _loaded(source)(), write_end, stack_fd)


def _loaded(source) -> Callable[[], object]:
    with source:
        return pickle.load(source)  # imports the work's modules: the stack dump is registered by then


def _serve(work: Callable[[], object], write_end: int, stack_fd: int) -> None:
    code = 0
    try:
        faulthandler.register(signal.SIGUSR1, file=stack_fd, all_threads=True)
        try:
            payload = {"ok": work()}
        except BaseException as exc:  # handed back as text: a live exception does not cross processes
            payload = {"error": [type(exc).__name__, str(exc), "".join(traceback.format_exception(exc))[-8000:]]}
        try:
            data = json.dumps(payload, default=_plain).encode()
        except Exception as exc:  # a circular value, or a number JSON cannot carry
            data = json.dumps(
                {"error": ["EncodingError", f"the run's result could not be handed back as JSON: {exc}", ""]}
            ).encode()
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
    except BaseException:
        code = 70
    finally:
        os._exit(code)  # no atexit handlers, no flushing of the parent's buffers a second time


def _plain(value):
    """JSON for what it has no form of: a set as a list, anything else (an event's odd payload) as its text."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def _drain(fd: int, into: bytearray, limit: int) -> None:
    with os.fdopen(fd, "rb") as source:
        while chunk := source.read(1 << 16):
            into.extend(chunk)
            if len(into) > limit:  # kept bounded: the child is killed once this returns
                return


def _stack_of(pid: int, stack, root: Path) -> str | None:
    inside = confined_pids(pid)  # the sandbox's own processes: bwrap would die of the signal, not dump a stack
    for target in inside:
        try:
            os.kill(target, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    if not inside:
        return None
    time.sleep(STACK_GRACE_SECONDS)
    stack.seek(0)
    text = stack.read().decode("utf-8", errors="replace")
    root = Path(root).resolve()
    for match in FRAME.finditer(text):  # faulthandler lists the most recent call first
        path = Path(match["file"])
        if path.is_absolute() and path.resolve().is_relative_to(root) and "site-packages" not in path.parts:
            return f"{path.resolve().relative_to(root).as_posix()}:{match['line']} in {match['name']}"
    return None


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
