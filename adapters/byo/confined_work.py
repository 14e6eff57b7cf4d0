"""What the team's code does in one run, in the pipeline's own confined process (adapters/byo/confine.py):
its folder made importable, the run's cwd, HOME and model endpoint, the factory built, the tools wrapped,
the pipeline run and the pass criterion applied. Apart from the runner (adapters/byo/runner.py), which
holds the fault, the gateway and the record in the parent and never imports the team's code: the
work handed to the confined process (`in_pipeline_process`) is pickled by reference to this module."""

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from adapters.byo import agent_framework_run, autogen_run, crewai_run, langgraph_run
from adapters.byo.errors import TeamCodeError, team_code_error
from adapters.byo.surfaces import Acts
from adapters.byo.tool_channel import ToolChannel
from adapters.byo.tools import WrappedTools
from adapters.endpoint import API_KEY_ENV, BASE_URL_ENV
from adapters.outcome import INFRASTRUCTURE_ERRORS
from sabot.plugins import resolve_path
from sabot.projects import Project
from sabot.recorder import Recorder
from sabot.trace import EventKind

FRAMEWORKS = {
    "langgraph": langgraph_run,
    "crewai": crewai_run,
    "autogen": autogen_run,
    "agent_framework": agent_framework_run,
}  # each: run(), parts()
PROXY_KEY = "sk-sabot-fault-proxy"  # what the pipeline holds; a provider key never leaves the gateway
PASS_TIMEOUT = 60
# What every framework's OpenAI client imports lazily on its first call (~0.8 s; adapters.pool preloads the same).
SHOWN_OUTPUT = 2000  # characters of a pass criterion's output kept in the record


class _Where:
    """The component currently running (tool calls are attributed to it)."""

    node = "pipeline"


@contextlib.contextmanager
def importable(project: Project):
    """The project's folder on sys.path for the run (its pipeline, test double and checks are modules
    there), imported afresh: a module of that name imported before (an earlier run in this process,
    another project's module of the same name) is dropped first, so the code on disk is what runs."""
    root = str(project.root)
    tops = {p.stem for p in project.root.glob("*.py")} | {p.parent.name for p in project.root.glob("*/__init__.py")}
    for name in [n for n in sys.modules if n.partition(".")[0] in tops]:
        del sys.modules[name]
    sys.path.insert(0, root)
    try:
        yield
    finally:
        if root in sys.path:
            sys.path.remove(root)


@contextlib.contextmanager
def pipeline_env(project: Project, run_dir: Path, base_url: str):
    """The process state a run needs: cwd and HOME in the run's directory, the OpenAI SDK pointed at
    the fault layer, and the provider's settings out of sight (`project check` builds the factory in
    its own process). Everything is restored afterwards."""
    saved_env = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "HOME", API_KEY_ENV, BASE_URL_ENV)}
    saved_cwd = os.getcwd()
    (run_dir / "home").mkdir(parents=True, exist_ok=True)
    for hidden in (API_KEY_ENV, BASE_URL_ENV):
        os.environ.pop(hidden, None)
    os.environ.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": PROXY_KEY, "HOME": str(run_dir / "home")})
    os.chdir(run_dir)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class PassResult:
    """The pass criterion's verdict on one run, and what it said (shown when a baseline fails)."""

    passed: bool
    output: str


def apply_pass_criterion(project: Project, output, run_dir: Path) -> PassResult:
    """The project's pass criterion: `module:function(output, workdir)` returning a bool (or
    `(bool, message)`), or a command that reads the output as JSON on stdin in the run's directory
    and exits 0 on a pass. What it returned, printed or wrote is its output."""
    check = project.doc["task"]["pass"]
    if isinstance(check, str):
        return _apply_function(project, check, output, run_dir)
    argv = check["command"]
    try:
        done = subprocess.run(
            argv,
            cwd=run_dir,
            input=json.dumps(output, default=str),
            text=True,
            capture_output=True,
            timeout=PASS_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise TeamCodeError(f"pass criterion command {argv} ran past {PASS_TIMEOUT} s") from None
    except OSError as exc:
        raise TeamCodeError(f"pass criterion command {argv} could not start: {exc}") from None
    said = "\n".join(x.strip() for x in (done.stdout, done.stderr) if x.strip())
    return PassResult(
        done.returncode == 0, f"exit status {done.returncode}" + (f": {said[-SHOWN_OUTPUT:]}" if said else "")
    )


def _apply_function(project: Project, check: str, output, run_dir: Path) -> PassResult:
    what = f"pass criterion {check}"
    printed = io.StringIO()
    try:
        fn = resolve_path(check, f"{project.name}: task.pass")
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            value = fn(output, run_dir)
    except Exception as exc:
        raise team_code_error(what, exc, project.root) from None
    passed, message = (value[0], str(value[1])) if isinstance(value, tuple) and len(value) == 2 else (value, "")
    said = "\n".join(x for x in (message, printed.getvalue().strip()) if x)
    return PassResult(bool(passed), (said or f"returned {value!r}")[-SHOWN_OUTPUT:])


def build(project: Project):
    """(pipeline, factory module): the team's factory called as the run calls it."""
    what = f"pipeline factory {project.doc['pipeline']}"
    try:
        factory = resolve_path(project.doc["pipeline"], f"{project.name}: pipeline")
        return factory(), sys.modules.get(factory.__module__)
    except Exception as exc:
        raise team_code_error(what, exc, project.root) from None


@contextlib.contextmanager
def pipeline_process(project: Project, run_dir: Path, base_url: str):
    """What the team's code sees while it is built and run (its folder made importable apart): the
    run's cwd and HOME, the model endpoint at `base_url`, and its framework's own settings."""
    environment = getattr(FRAMEWORKS[project.framework], "environment", None)
    with pipeline_env(project, run_dir, base_url), environment() if environment else contextlib.nullcontext():
        yield


class StampedRecorder(Recorder):
    """A recorder whose events carry the monotonic clock (one clock for every process on the host),
    so the events of the pipeline's process and of the fault layer's merge in the order they happened."""

    def __init__(self):
        super().__init__()
        self.stamps: list[int] = []
        self._lock = threading.Lock()

    def record(self, agent: str, kind: str, **payload) -> int:
        with self._lock:
            self.stamps.append(time.monotonic_ns())
            return super().record(agent, kind, **payload)

    def stamped(self) -> list[tuple[int, str, str, dict]]:
        return [(t, e.agent, e.kind, e.payload) for t, e in zip(self.stamps, self.events)]


def in_pipeline_process(project: Project, run_dir: Path, base_url: str) -> dict:
    """Everything the team's code does in one run, in the pipeline's own process (adapters.byo.confine):
    build the factory, wrap the tools, run the pipeline against `base_url`, apply the pass criterion.
    Never handed the run's fault (its operator, spec or ground truth): the wrapped tools ask the harness
    at `base_url` (adapters/byo/tool_channel.py), as the model calls go through it."""
    recorder, where = StampedRecorder(), _Where()
    with contextlib.ExitStack() as stack:
        stack.enter_context(importable(project))
        stack.enter_context(pipeline_process(project, run_dir, base_url))
        pipeline, module = build(project)
        tools = WrappedTools(pipeline, module, ToolChannel(base_url), lambda: where.node)
        stack.callback(tools.restore)
        try:
            output = FRAMEWORKS[project.framework].run(
                pipeline, project.doc["task"]["inputs"], Acts(project.mapping["surfaces"], recorder), where
            )
        except INFRASTRUCTURE_ERRORS as exc:  # the endpoint's failure: the gateway in the parent knows its cause
            return {"infrastructure": f"{type(exc).__name__}: {exc}"}
        except Exception as exc:  # the team's pipeline crashed: a failed run, not an act (no mapping names it)
            recorder.record(
                where.node,
                EventKind.PIPELINE_ERROR,
                error=str(team_code_error("the pipeline", exc, project.root))[:2000],
            )
            output = {"error": f"{type(exc).__name__}: {exc}"}
        result = apply_pass_criterion(project, output, run_dir)
    # Handed back as JSON (adapters.byo.confine), read back by adapters.byo.answer.run_answer.
    return {
        "events": recorder.stamped(),
        "tools_wrapped": sorted(tools.names),
        "pass": {"passed": bool(result.passed), "output": result.output},
    }
