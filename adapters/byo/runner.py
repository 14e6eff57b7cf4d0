"""One run of a team's own pipeline: its factory, its test double or its provider, one fault at a seam.

Per run: a fresh working directory (also the pipeline's cwd) and HOME; the project's test double
served on 127.0.0.1 (or the provider from SABOT_MODEL_BASE_URL + SABOT_MODEL_API_KEY); the
fault-injecting proxy in front of it, handed to the pipeline through OPENAI_BASE_URL; the tool
objects wrapped by name. The pipeline never learns it is under test, and ground truth (the
operators' notes, the pass criterion) stays with the harness.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from adapters.byo import autogen_run, langgraph_run
from adapters.byo.proxy import FaultLayer, FaultProxy
from adapters.byo.seams import SeamFault
from adapters.byo.surfaces import Acts
from adapters.byo.tools import WrappedTools
from adapters.endpoint import provider_from_env
from adapters.runner import INFRASTRUCTURE_ERRORS, RunOutcome
from adapters.scripted.server import Reply, ScriptedModelServer, ToolCall
from sabot.plugins import resolve_path
from sabot.projects import Project, ProjectError
from sabot.recorder import Recorder
from sabot.trace import RunRecord

FRAMEWORK_RUNS = {"langgraph": langgraph_run.run, "autogen": autogen_run.run}
PROXY_KEY = "sk-sabot-fault-proxy"  # what the pipeline holds; a provider key never leaves the proxy
DOUBLE_KEY = "sk-test-double"
SIMULATION = "simulation (the project's own test double on 127.0.0.1)"
PASS_TIMEOUT = 60


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
    """The project's folder on sys.path for the run (its pipeline, test double and checks are modules there)."""
    root = str(project.root)
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


def passes(project: Project, output, run_dir: Path) -> bool:
    """The project's pass criterion: `module:function(output, workdir) -> bool`, or a command that
    reads the output as JSON on stdin in the run's directory and exits 0 on a pass."""
    check = project.doc["task"]["pass"]
    if isinstance(check, str):
        return bool(resolve_path(check, f"{project.name}: task.pass")(output, run_dir))
    done = subprocess.run(check["command"], cwd=run_dir, input=json.dumps(output, default=str), text=True,
                          capture_output=True, timeout=PASS_TIMEOUT)
    return done.returncode == 0


def execute(project: Project, operator: str | None, seed: int, run_id: str, run_dir: Path):
    """(record, exchanges) of one run; exceptions from the pipeline propagate (the caller classifies them)."""
    recorder, where = Recorder(), _Where()
    fault = SeamFault(operator, project.operators.get(operator) if operator else None, recorder)
    layer = FaultLayer(project.doc["agents"], fault, recorder)
    provider = provider_from_env("", "")
    with contextlib.ExitStack() as stack:
        stack.enter_context(importable(project))
        if provider is None and "responder" not in project.doc:
            raise ProjectError(f"{project.name}: no test double (project.json: responder) and no provider "
                               f"(SABOT_MODEL_BASE_URL and SABOT_MODEL_API_KEY): nothing to answer the pipeline's model calls")
        if provider is None:
            double = resolve_path(project.doc["responder"], f"{project.name}: responder")(seed)
            server = stack.enter_context(ScriptedModelServer(lambda request: as_reply(double(request))))
            upstream, key, label = server.base_url, DOUBLE_KEY, SIMULATION
        else:
            upstream, key, label = provider.base_url, provider.api_key, provider.label
        proxy = stack.enter_context(FaultProxy(upstream, key, layer))
        stack.enter_context(pipeline_env(project, run_dir, proxy.base_url))
        factory = resolve_path(project.doc["pipeline"], f"{project.name}: pipeline")
        pipeline = factory()
        tools = WrappedTools(pipeline, sys.modules.get(factory.__module__), fault, lambda: where.node)
        stack.callback(tools.restore)
        try:
            output = FRAMEWORK_RUNS[project.framework](pipeline, project.doc["task"]["inputs"], Acts(project.mapping["surfaces"], recorder), where)
        except INFRASTRUCTURE_ERRORS:
            raise
        except Exception as exc:  # the team's pipeline crashed: a failed run, not an act (no mapping names it)
            recorder.record(where.node, "pipeline-error", error=f"{type(exc).__name__}: {exc}"[:2000])
            output = {"error": f"{type(exc).__name__}: {exc}"}
        passed = passes(project, output, run_dir)
    recorder.record("emit", "verdict", task_passed=passed)
    why_not = fault.why_not(tools.seen, layer.agents_seen)
    injection = {"seam": fault.seam, "landed": fault.landed, "evidence": fault.evidence, "why_not": why_not,
                 "tools_wrapped": sorted(tools.names), "agents_seen": sorted(layer.agents_seen)}
    record = recorder.record_of(
        run_id=run_id, framework=project.framework, config=project.config, task=project.task_id, operator=operator, seed=seed,
        injection_verified=bool(operator) and fault.landed, task_passed=passed, error=None,
        extra={"endpoint": label, "exchanges": layer.exchanges, "protocol": 1, "project": project.name, "injection": injection},
    )
    return record


def run_project(spec, project: Project, work_root: Path):
    """A run, retried once on an infrastructure failure, then recorded as RUN_ERROR (never raised)."""
    error = None
    for attempt in (1, 2):
        run_dir = Path(work_root) / spec.run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        try:
            return RunOutcome(execute(project, spec.operator, spec.seed, spec.run_id, run_dir), [])
        except INFRASTRUCTURE_ERRORS as exc:
            error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
    record = RunRecord(spec.run_id, spec.framework, spec.config, spec.task, spec.operator, spec.seed, (), None, False, False, error)
    return RunOutcome(record, [])
