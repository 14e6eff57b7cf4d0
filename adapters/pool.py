"""Many live runs at once, each in a process of its own.

CrewAI's event bus, AutoGen's trace logger and the per-run HOME are process-global, so two runs
never share a process: every run is forked from a server process that imported the harness's side
of a run once (multiprocessing's "forkserver" start method with the runner preloaded, and
`max_tasks_per_child=1`), and its pipeline runs in a child forked, one per run, from the confined
server that fork server starts (adapters/confined_server.py: inside bubblewrap, where the agent
frameworks are imported once). A run then pays two forks, not the ~5 s import of three agent
frameworks, and leaves nothing behind for the next one. The fork server is still stopped with
CPython's private stop, kept alone in adapters/forkserver_stop.py (the confined server dies with it).

`run_many` keeps up to `concurrency` runs in flight and asks `may_launch(item)` before starting
each one, so a budget breaker or a pool of slots stops launching while the runs already in flight
finish and are kept. Results come back as they finish, so the caller stores each one at once.
"""

import contextlib
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from adapters.confined_run import pipeline_modules
from adapters.confined_server import CONFINED_PRELOAD_ENV
from adapters.forkserver_stop import stop_forkserver
from adapters.parent_watch import STARTER_ENV, die_with_parent
from adapters.runner import PIPELINES, RunOutcome, RunSpec, run
from sabot.trace import RunRecord

# Imported once by the fork server, so a child pays none of it. The frameworks import lazily, so
# the pipelines are listed (only those a wave runs, when it says: crewai alone is ~3 s of the server's
# ~8 s start, which the first run waits for); left to each child, openai.resources, httpcore and
# anyio's backend cost ~0.8 s a run (measured with cProfile). fork_ready comes last: it runs the
# caller's main script once (CPython 3.11 ignores "__main__" here) and freezes the heap out of the GC.
# adapters.run_attempt brings the run root, its seal and the record writer (another ~20 modules a child imported).
# adapters.fork_confined starts the confined server (where the pipelines run, importing their frameworks) at once.
RUNNER_PRELOAD = [
    "adapters.fork_watch",
    "adapters.fork_confined",
    "adapters.runner",
    "adapters.run_attempt",
]  # the watch first
CLIENT_PRELOAD = ["openai.resources", "httpcore", "anyio._backends._asyncio", "adapters.fork_ready"]
MAIN_ENV = "SABOT_FORK_MAIN"  # read by adapters.fork_ready in the fork server
DEFAULT_CONCURRENCY = 8  # measured: bench/bench_concurrency.py (README, "Concurrency")


class _Server:
    """The process's one fork server (multiprocessing's), what it preloaded, and the pools using it."""

    lock = threading.Lock()
    frameworks: frozenset[str] | None = None  # preloaded pipelines; None: not started here yet
    pools_open = 0


def preload(frameworks: Iterable[str]) -> list[str]:
    """The fork server's own imports: the harness side of a run. The pipelines (and their frameworks)
    are imported by the confined server it starts (adapters.fork_confined), never here."""
    os.environ[CONFINED_PRELOAD_ENV] = json.dumps(pipeline_modules(frameworks))  # read by adapters.fork_confined
    return [*RUNNER_PRELOAD, *CLIENT_PRELOAD]


def start_fork_server(frameworks: Iterable[str] | None = None) -> None:
    """Start the fork server now, without waiting for it: its framework imports then overlap the
    caller's own set-up (a wave's pre-registration) instead of delaying the first run.

    `frameworks`: the pipelines to preload (default: every registered one). A server already
    running without one of them is restarted with both sets, but only while no pool uses it (its
    runs die with it); otherwise a run of a framework it lacks imports that framework itself."""
    from multiprocessing import forkserver

    wanted = frozenset(PIPELINES if frameworks is None else (f for f in frameworks if f in PIPELINES))
    with _Server.lock:
        if _Server.frameworks is not None:
            if wanted <= _Server.frameworks or _Server.pools_open:
                return
            stop_forkserver()  # no run is in flight
            wanted |= _Server.frameworks
        _Server.frameworks = wanted
        _context()
        forkserver.ensure_running()


def stop_fork_server() -> bool:
    """Stop the fork server if no pool uses it (it starts again on demand); whether it was stopped."""
    with _Server.lock:
        if _Server.pools_open:
            return False
        stop_forkserver()
        _Server.frameworks = None
        return True


def _context():
    from multiprocessing import spawn

    # Read by the fork server when it starts (it inherits this environment): the script a child
    # would otherwise re-run before every run.
    main = spawn.get_preparation_data("sabot-run").get("init_main_from_path")
    os.environ[MAIN_ENV] = json.dumps({"init_main_from_path": main})
    os.environ[STARTER_ENV] = str(
        os.getpid()
    )  # the server watches this pid from its first import (adapters.fork_watch)
    ctx = multiprocessing.get_context("forkserver")
    if _Server.frameworks is None:  # a pool starts the server itself: every pipeline
        _Server.frameworks = frozenset(PIPELINES)
    ctx.set_forkserver_preload(preload(_Server.frameworks))  # read only when a server starts
    return ctx


class RunFailed(RuntimeError):
    """A run's process raised: its message, where it was raised and for which item, as plain text.

    The child's own exception never crosses back: a client library's error may not unpickle in the
    parent (openai's APIStatusError needs its response), and an exception that fails to unpickle
    breaks the whole pool, taking every healthy run in flight down with it."""

    def __init__(self, item: str, kind: str, message: str, where: str, trace: str = ""):
        super().__init__(f"{item}: {kind}: {message}" + (f" (at {where})" if where else ""))
        self.item, self.kind, self.message, self.where, self.trace = item, kind, message, where, trace

    def __reduce__(self):
        return type(self), (self.item, self.kind, self.message, self.where, self.trace)


def _item_name(item) -> str:
    return getattr(item, "run_id", None) or str(item)


def _failure_of(item, exc: BaseException) -> RunFailed:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    secrets = [os.environ.get(name) for name in ("SABOT_MODEL_API_KEY",)]
    from adapters.gateway.taxonomy import Scrubber

    scrub = Scrubber(*secrets)
    trace = scrub.text("".join(traceback.format_exception(exc)))
    return RunFailed(_item_name(item), type(exc).__name__, scrub.text(str(exc)) or repr(exc), where, trace)


def _in_child(fn: Callable, item, environ: dict):
    die_with_parent()  # the fork server gone (its command killed): this run stops too, no call is left running
    # A forked child inherits the fork server's environment from when that started; the run must
    # see the caller's environment of now (endpoint switch, scripted latency, SABOT_* settings).
    os.environ.clear()
    os.environ.update(environ)
    try:
        return fn(item)
    except RunFailed:
        raise
    except Exception as exc:  # as text, never the live object (see RunFailed)
        raise _failure_of(item, exc) from None


@contextlib.contextmanager
def _pool_open():
    with _Server.lock:
        _Server.pools_open += 1
    try:
        yield
    finally:
        with _Server.lock:
            _Server.pools_open -= 1


def run_many(
    fn: Callable[[Any], Any],
    items: Iterable,
    concurrency: int = DEFAULT_CONCURRENCY,
    may_launch: Callable[[Any], bool] = lambda item: True,
    on_crash: Callable[[Any, BaseException], Any] | None = None,
) -> Iterator[tuple[Any, Any, float]]:
    """(item, fn(item), seconds) for every item launched, in the order they finish.

    `fn` must be picklable (a module-level function or a functools.partial of one). An item is
    launched only while `may_launch(item)` holds; items never launched are not yielded, and the
    caller leaves them missing so a later wave resumes them. A process that dies (killed, out of
    memory) gives `on_crash(item, exc)` if given, else raises.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    pending = list(items)[::-1]  # pop() from the end keeps the caller's order
    if not pending:
        return
    workers = min(concurrency, len(pending))
    # One process more than the runs in flight: a spare, forked while the others run, takes the next run
    # the moment one finishes (each process runs one run and exits; its replacement forks meanwhile).
    spare = 1 if len(pending) > workers else 0
    # die_with_parent as each worker starts, not at its first run: a worker forked just before the command died
    # waits for a run that never comes, holding the resource tracker open, unless it dies with the fork server.
    with (
        _pool_open(),
        ProcessPoolExecutor(
            max_workers=workers + spare, mp_context=_context(), max_tasks_per_child=1, initializer=die_with_parent
        ) as pool,
    ):
        in_flight: dict[Future, tuple[Any, float]] = {}

        def fill() -> None:
            while pending and len(in_flight) < workers and may_launch(pending[-1]):
                item = pending.pop()
                in_flight[pool.submit(_in_child, fn, item, dict(os.environ))] = (item, time.perf_counter())

        fill()
        broken = False
        while in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                item, started = in_flight.pop(future)
                try:
                    result = future.result()
                except RunFailed as exc:
                    # Its text says it all; the remote traceback concurrent.futures chains on would
                    # reach the user as an empty "_RemoteTraceback:" line (the trace is kept on it).
                    exc.__cause__, exc.__suppress_context__ = None, True
                    raise
                except BrokenProcessPool as exc:
                    if on_crash is None:
                        raise
                    broken, result = True, on_crash(item, exc)
                yield item, result, time.perf_counter() - started
            if broken:
                # A dead worker breaks the whole executor: what was still queued goes to a fresh one.
                rest = [item for item, _ in in_flight.values()] + pending[::-1]
                in_flight.clear()
                yield from run_many(fn, rest, concurrency, may_launch, on_crash)
                return
            fill()


# Live runs: the callables the run assets and tests hand to run_many.


def run_spec(spec: RunSpec, registry, work_root: str) -> RunOutcome:
    return run(spec, registry, Path(work_root))


def crashed_run(spec: RunSpec, exc: BaseException) -> RunOutcome:
    """A run whose process died: infrastructure, stored as RUN_ERROR, never raised."""
    error = f"the run's process died: {type(exc).__name__}: {exc}"
    return RunOutcome(
        RunRecord(
            spec.run_id, spec.framework, spec.config, spec.task, spec.operator, spec.seed, (), None, False, False, error
        ),
        [],
    )


def crashed_attempt(spec: RunSpec, exc: BaseException, run_root: Path, identity, dagster_run_id: str) -> Path:
    """The attempt of a run whose process died, written (in the parent) as RUN_ERROR to the run root.

    A dead worker breaks the whole pool, so every run in flight reports the crash, also one whose
    child had already finished its attempt: that finished attempt is returned as it is, never
    relabelled by what happened to another process."""
    from sabot import runroot
    from sabot.matrix import Probe

    probe = Probe(spec.framework, spec.config, spec.task, spec.seed)
    for directory in reversed(runroot.finished_attempts(Path(run_root), spec.wave, probe, spec.operator)):
        if _attempt_meta(directory).get("dagster_run_id") == dagster_run_id:
            return directory
        break
    directory = runroot.allocate(Path(run_root), spec.wave, probe, spec.operator)
    record = crashed_run(spec, exc).record
    return runroot.write_attempt(
        directory, spec.wave, record, "run_error", identity, [], dagster_run_id, runroot.started_now()
    )


def _attempt_meta(directory: Path) -> dict:
    try:
        return json.loads((directory / "attempt.json").read_text())
    except (OSError, ValueError):
        return {}
