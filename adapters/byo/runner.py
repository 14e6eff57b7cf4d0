"""One run of a team's own pipeline: its factory, its test double or its provider, one fault at a seam.

Per run: a fresh working directory (also the pipeline's cwd) and HOME; the project's test double
served on 127.0.0.1 (or the provider from SABOT_MODEL_BASE_URL + SABOT_MODEL_API_KEY); the
fault-injecting proxy in front of it, handed to the pipeline through OPENAI_BASE_URL; the tool
objects wrapped by name. The pipeline never learns it is under test, and ground truth (the
operators' notes, the pass criterion) stays with the harness.

A failure of the team's own code (the factory, the test double, the pass criterion) is a
`TeamCodeError` naming the file, line and error: the run is a RUN_ERROR at once, since running
the same code again would fail the same way.
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from adapters.byo import autogen_run, crewai_run, langgraph_run
from adapters.byo.errors import TeamCodeError, team_code_error
from adapters.byo.proxy import FaultLayer, FaultProxy
from adapters.byo.seams import SeamFault
from adapters.byo.surfaces import Acts
from adapters.byo.tools import WrappedTools
from adapters.endpoint import provider_from_env
from adapters.outcome import INFRASTRUCTURE_ERRORS, RunOutcome
from adapters.scripted.server import Reply, ScriptedModelServer, ToolCall
from sabot.plugins import resolve_path
from sabot.projects import Project, ProjectError
from sabot.recorder import Recorder
from sabot.trace import EventKind, RunRecord

FRAMEWORKS = {"langgraph": langgraph_run, "crewai": crewai_run, "autogen": autogen_run}  # each: run(), parts()
PROXY_KEY = "sk-sabot-fault-proxy"  # what the pipeline holds; a provider key never leaves the proxy
DOUBLE_KEY = "sk-test-double"
SIMULATION = "simulation (the project's own test double on 127.0.0.1)"
PASS_TIMEOUT = 60
SHOWN_OUTPUT = 2000  # characters of a pass criterion's output kept in the record


class _Where:
    """The component currently running (tool calls are attributed to it)."""

    node = "pipeline"


def as_reply(answer) -> Reply:
    """A test double's answer (text, or {"content"|"tool_calls"|"model"}) as the scripted server's Reply."""
    if isinstance(answer, str):
        return Reply(content=answer)
    if isinstance(answer, dict):
        calls = tuple(ToolCall(c["name"], c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]))
                      for c in answer.get("tool_calls", ()))
        return Reply(content=answer.get("content"), tool_calls=calls, model=answer.get("model"))
    raise TypeError(f"a test double answers with text or a dict, not {type(answer).__name__}")


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
    """The process state a run needs: cwd and HOME in the run's directory,
    and the OpenAI SDK pointed at the proxy. Everything is restored afterwards."""
    saved_env = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "HOME")}
    saved_cwd = os.getcwd()
    (run_dir / "home").mkdir(parents=True, exist_ok=True)
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
        done = subprocess.run(argv, cwd=run_dir, input=json.dumps(output, default=str), text=True, capture_output=True, timeout=PASS_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise TeamCodeError(f"pass criterion command {argv} ran past {PASS_TIMEOUT} s") from None
    except OSError as exc:
        raise TeamCodeError(f"pass criterion command {argv} could not start: {exc}") from None
    said = "\n".join(x.strip() for x in (done.stdout, done.stderr) if x.strip())
    return PassResult(done.returncode == 0, f"exit status {done.returncode}" + (f": {said[-SHOWN_OUTPUT:]}" if said else ""))


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


class _Double:
    """The project's test double behind the scripted server: an exception in it is the team's to fix,
    kept to fail the run with (the pipeline only ever sees the server's 500 for it)."""

    def __init__(self, project: Project, seed: int):
        what = f"test double {project.doc['responder']}"
        self.project, self.what, self.error = project, what, None
        try:
            self.respond = resolve_path(project.doc["responder"], f"{project.name}: responder")(seed)
        except Exception as exc:
            raise team_code_error(what, exc, project.root) from None

    def __call__(self, request: dict) -> Reply:
        try:
            return as_reply(self.respond(request))
        except Exception as exc:
            self.error = self.error or team_code_error(self.what, exc, self.project.root)
            return Reply(status=500, error=str(self.error))

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


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


def execute(project: Project, operator: str | None, seed: int, run_id: str, run_dir: Path, offline: bool = False):
    """The record of one run (`offline`: on the test double even when a provider is set);
    infrastructure errors and TeamCodeError propagate (the caller classifies them)."""
    recorder, where = Recorder(), _Where()
    fault = SeamFault(operator, project.operators.get(operator) if operator else None, recorder)
    layer = FaultLayer(project.doc["agents"], fault, recorder)
    provider, double = None if offline else provider_from_env("", ""), None
    with contextlib.ExitStack() as stack:
        stack.enter_context(importable(project))
        if provider is None and "responder" not in project.doc:
            raise ProjectError(f"{project.name}: no test double (project.json: responder) and no provider "
                               f"(SABOT_MODEL_BASE_URL and SABOT_MODEL_API_KEY): nothing to answer the pipeline's model calls")
        if provider is None:
            double = _Double(project, seed)
            server = stack.enter_context(ScriptedModelServer(double))
            upstream, key, label = server.base_url, DOUBLE_KEY, SIMULATION
        else:
            upstream, key, label = provider.base_url, provider.api_key, provider.label
        proxy = stack.enter_context(FaultProxy(upstream, key, layer))
        stack.enter_context(pipeline_process(project, run_dir, proxy.base_url))
        pipeline, module = build(project)
        tools = WrappedTools(pipeline, module, fault, lambda: where.node)
        stack.callback(tools.restore)
        try:
            output = FRAMEWORKS[project.framework].run(pipeline, project.doc["task"]["inputs"], Acts(project.mapping["surfaces"], recorder), where)
        except INFRASTRUCTURE_ERRORS:
            if double is not None:
                double.raise_if_failed()  # the double's own bug, not the endpoint's
            raise
        except Exception as exc:  # the team's pipeline crashed: a failed run, not an act (no mapping names it)
            recorder.record(where.node, EventKind.PIPELINE_ERROR, error=str(team_code_error("the pipeline", exc, project.root))[:2000])
            output = {"error": f"{type(exc).__name__}: {exc}"}
        if double is not None:
            double.raise_if_failed()
        result = apply_pass_criterion(project, output, run_dir)
    recorder.record("emit", EventKind.VERDICT, task_passed=result.passed)
    injection = {**fault.summary(), "why_not": fault.why_not(tools.seen, layer.agents_seen),
                 "tools_wrapped": sorted(tools.names), "agents_seen": sorted(layer.agents_seen)}
    return recorder.record_of(
        run_id=run_id, framework=project.framework, config=project.config, task=project.task_id, operator=operator, seed=seed,
        injection_verified=bool(operator) and fault.landed, task_passed=result.passed, error=None,
        extra={"endpoint": label, "exchanges": layer.exchanges, "protocol": 1, "project": project.name, "injection": injection,
               "pass_criterion": {"passed": result.passed, "output": result.output}},
    )


def run_project(spec, project: Project, work_root: Path):
    """A run, retried once on an infrastructure failure, then recorded as RUN_ERROR (never raised).
    A failure of the team's code or folder is recorded as RUN_ERROR at once, naming it."""
    error = None
    for attempt in (1, 2):
        run_dir = Path(work_root) / spec.run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        try:
            return RunOutcome(execute(project, spec.operator, spec.seed, spec.run_id, run_dir), [])
        except INFRASTRUCTURE_ERRORS as exc:
            error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
        except (TeamCodeError, ProjectError) as exc:
            error = str(exc)
            break
    record = RunRecord(spec.run_id, spec.framework, spec.config, spec.task, spec.operator, spec.seed, (), None, False, False, error)
    return RunOutcome(record, [])
