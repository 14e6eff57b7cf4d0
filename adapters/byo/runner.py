"""One run of a team's own pipeline: its factory, its test double or its provider, one fault at a seam.

One run path, the built-in runs' (adapters/runner.py): the pipeline's model calls go pipeline ->
fault layer (adapters/byo/proxy.py: agent attribution, the model-seam fault) -> the run's model
gateway (adapters/gateway: call policy, rate limiter, usage and spend, record and replay, the key)
-> upstream: the project's test double on 127.0.0.1 (in a sandbox of its own, adapters/byo/double.py), or the provider from SABOT_MODEL_BASE_URL +
SABOT_MODEL_API_KEY. An O4 swap lands when the endpoint reports serving the target's model family
(the id or a dated snapshot of it, data/standard/model_ids.v1.json).

The team's code (factory, pipeline, tools, pass criterion) runs in a confined process of its own
(adapters/byo/confine.py, adapters/confinement.py; what it does there: adapters/byo/confined_work.py):
a bubblewrap sandbox seeing its project folder read-only and a fresh working directory (its cwd and HOME) read-write, never the store, the run
root or the seal key; no provider key or URL in its environment, the OpenAI SDK pointed at the fault
layer with a placeholder key, and the call policy's run wall limit. The tool objects are wrapped by name there. The pipeline never learns it
is under test; the pass criterion runs after it returned, on its output.

A failure of the team's own code (the factory, the test double, the pass criterion, a hang past the
wall limit) is a `TeamCodeError` naming the file, line and error: the run is a RUN_ERROR at once,
since running it again would fail the same way. What the provider's answers mean is the gateway's
taxonomy, as for a built-in run (data/standard/provider_errors.v1.json): a wrong key or an exhausted
quota stops the wave with the cell left missing, a refused request (an unknown model) is that cell's
RUN_ERROR.
"""

import contextlib
import dataclasses
import functools
import shutil
from pathlib import Path

from adapters.byo.answer import run_answer
from adapters.byo.confined_work import PassResult, StampedRecorder, in_pipeline_process
from adapters.byo.double import ConfinedDouble
from adapters.byo.double import as_reply as as_reply  # where the tests and older callers import it from
from adapters.confinement import ConfinementUnavailable
from adapters.byo.confine import ChildDied, ChildFailed, WallLimitExceeded, run_confined
from adapters.byo.errors import TeamCodeError
from adapters.byo.proxy import AGENT_HEADER, UNATTRIBUTED, FaultLayer, FaultProxy
from adapters.byo.seams import SeamFault
from adapters.endpoint import provider_from_env
from adapters.gateway import (
    GATEWAY_KEY,
    CallPolicy,
    CellFailed,
    EndpointStopped,
    ModelGateway,
    ProviderTaxonomy,
    Upstream,
)
from adapters.gateway.policy import POLICY_DOC
from adapters.outcome import INFRASTRUCTURE_ERRORS, RunOutcome, unscored_record
from sabot.budget import Margin
from sabot.model_ids import served_as
from sabot.pricing import PriceTable, call_rows, totals
from sabot.projects import Project, ProjectError
from sabot.recorder import Recorder

DOUBLE_KEY = "sk-test-double"
SIMULATION = "simulation (the project's own test double on 127.0.0.1)"


def merged(*logs: list[tuple[int, str, str, dict]]) -> Recorder:
    """One recorder holding every log's events in clock order (ties: the earlier log first)."""
    out = Recorder()
    ordered = sorted(
        (
            (t, i, j, agent, kind, payload)
            for i, log in enumerate(logs)
            for j, (t, agent, kind, payload) in enumerate(log)
        )
    )
    for *_, agent, kind, payload in ordered:
        out.record(agent, kind, **payload)
    return out


def project_registry(project: Project):
    """The registry a project's run reads its call policy, prices and model-id families from."""
    from sabot.project_registry import ProjectRegistry

    return ProjectRegistry(project)


def without_operators(project: Project) -> Project:
    """The project as the pipeline's process gets it: no operator, so no fault spec and no ground truth."""
    return dataclasses.replace(project, operators={})


def _source_of(project: Project, target: str) -> str:
    """The project file a "module:function" target lives in, for messages."""
    found = project.module_file(target)
    return found.relative_to(project.root).as_posix() if found else target


def confined_result(
    project: Project, work, policy: CallPolicy, secrets: tuple[str, ...], run_dir: Path, read=run_answer
):
    """The pipeline process's result, checked by `read` (adapters.byo.answer); its failures, a
    malformed answer included, as the errors the runner classifies."""
    wall = policy.run_wall_limit_seconds
    try:
        return read(run_confined(work, wall, project.root, secrets, scratch=run_dir))
    except WallLimitExceeded as exc:
        where = f"; it was at {exc.where}" if exc.where else ""
        raise TeamCodeError(
            f"the pipeline {project.doc['pipeline']} ({_source_of(project, project.doc['pipeline'])}) ran past the run's "
            f"wall limit of {wall:g} s (run_wall_limit_seconds, {POLICY_DOC}) and was stopped{where}"
        ) from None
    except ConfinementUnavailable as exc:  # never run unconfined: the run is refused, naming the missing tool
        raise ProjectError(str(exc)) from None
    except ChildDied as exc:
        raise TeamCodeError(
            f"the pipeline {project.doc['pipeline']} ({_source_of(project, project.doc['pipeline'])}): {exc}"
        ) from None
    except ChildFailed as exc:
        if exc.kind == "TeamCodeError":
            raise TeamCodeError(exc.message) from None
        if exc.kind == "ProjectError":
            raise ProjectError(exc.message) from None
        raise RuntimeError(f"the harness failed in the pipeline's process: {exc}\n{exc.trace}") from None


def execute(
    project: Project,
    operator: str | None,
    seed: int,
    run_id: str,
    run_dir: Path,
    offline: bool = False,
    registry=None,
    replay=None,
    call_policy: CallPolicy | None = None,
    spent: list | None = None,
    bound=None,
    journal=None,
):
    """The record of one run (`offline`: on the test double even when a provider is set; `replay`: a
    Recording answering every model call, nothing sent). Its model calls go pipeline -> fault layer ->
    model gateway -> upstream, as a built-in run's do; every exchange the gateway made is appended to
    `spent`, whatever the run's end. Infrastructure errors, EndpointStopped, CellFailed, TeamCodeError and
    ReplayMiss propagate (the caller classifies them)."""
    registry = registry if registry is not None else project_registry(project)
    policy = call_policy or CallPolicy.load(registry)
    spec = project.operators.get(operator) if operator else None
    recorder = StampedRecorder()
    fault = SeamFault(
        operator, spec, recorder, serves_target=lambda served: served_as(registry, "o4_downgrade_model", served)
    )
    layer = FaultLayer(project.doc["agents"], fault, recorder)
    provider = None if offline or replay is not None else provider_from_env("", "")
    double = None
    with contextlib.ExitStack() as stack:  # no team code is imported here: it runs in sandboxes (confine, double)
        if replay is not None:
            upstream, label = None, replay.endpoint_label
        elif provider is not None:
            upstream, label = (
                Upstream(
                    provider.base_url,
                    provider.api_key,
                    provider.label,
                    scripted=False,
                    local_model=provider.local_model,
                ),
                provider.label,
            )
        elif "responder" in project.doc:
            double = stack.enter_context(ConfinedDouble(project, seed, policy.run_wall_limit_seconds))
            upstream, label = Upstream(double.base_url, DOUBLE_KEY, SIMULATION, scripted=True), SIMULATION
        else:
            raise ProjectError(
                f"{project.name}: no test double (project.json: responder) and no provider "
                f"(SABOT_MODEL_BASE_URL and SABOT_MODEL_API_KEY): nothing to answer the pipeline's model calls"
            )
        gateway = stack.enter_context(
            ModelGateway(
                upstream,
                policy,
                run_id,
                replay.exchanges if replay is not None else None,
                taxonomy=ProviderTaxonomy.load(registry),
                bound=bound,
                journal=journal,
            )
        )
        if spent is not None:
            stack.callback(lambda: spent.extend(gateway.exchanges))
        proxy = stack.enter_context(FaultProxy(gateway.base_url, GATEWAY_KEY, layer, timeout=policy.client_timeout))
        work = functools.partial(in_pipeline_process, without_operators(project), run_dir, proxy.base_url)
        try:
            child = confined_result(project, work, policy, (provider.api_key,) if provider else (), run_dir)
        except TeamCodeError:
            if double is not None:
                double.raise_if_failed()  # the double's own bug is the cause of what followed
            raise
        if double is not None:
            double.raise_if_failed()
        gateway.raise_for_calls()  # a spent call budget or a replay miss is the cause, whatever the pipeline made of it
        if replay is not None:
            gateway.raise_for_unused()  # a recorded call the replay never made: it did not go as recorded
        if "infrastructure" in child:
            raise ConnectionError(f"the pipeline's model client failed: {child['infrastructure']}")
        exchanges = [
            {**x, "agent": (x.get("headers") or {}).get(AGENT_HEADER.lower(), UNATTRIBUTED)} for x in gateway.exchanges
        ]
    result = PassResult(**child["pass"])
    events = merged(recorder.stamped(), child["events"])
    events.record("emit", "verdict", task_passed=result.passed)
    injection = {
        **fault.summary(),
        "why_not": fault.why_not(fault.tools_seen, layer.agents_seen),
        "tools_wrapped": child["tools_wrapped"],
        "agents_seen": sorted(layer.agents_seen),
    }
    return events.record_of(
        run_id=run_id,
        framework=project.framework,
        config=project.config,
        task=project.task_id,
        operator=operator,
        seed=seed,
        injection_verified=bool(operator) and fault.landed,
        task_passed=result.passed,
        error=None,
        extra={
            "endpoint": label,
            "exchanges": exchanges,
            "protocol": 1,
            "project": project.name,
            "injection": injection,
            "pass_criterion": {"passed": result.passed, "output": result.output},
        },
    )


def run_project(
    spec,
    project: Project,
    work_root: Path,
    registry=None,
    replay=None,
    call_policy: CallPolicy | None = None,
    journal=None,
):
    """A run, retried once on an infrastructure failure, then recorded as RUN_ERROR (never raised).
    A failure of the team's code or folder, or a call the endpoint refused, is recorded as RUN_ERROR
    at once, naming it. Every attempt's calls are priced into the record's usage, as a built-in run's."""
    registry = registry if registry is not None else project_registry(project)
    prices = PriceTable.from_registry(registry)
    # Held to the registered per-run bounds at a provider, both attempts together, as a built-in run is; offline, to its call bound.
    bound = Margin.from_registry(registry).bound_for(prices, provider_from_env("", "") is not None, replay is not None)
    error, failed_exchanges, calls = None, [], []
    for attempt in (1, 2):
        run_dir = Path(work_root) / spec.run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        spent: list = []
        if journal is not None:
            journal.attempt = attempt
        try:
            record = execute(
                project,
                spec.operator,
                spec.seed,
                spec.run_id,
                run_dir,
                registry=registry,
                replay=replay,
                call_policy=call_policy,
                spent=spent,
                bound=bound,
                journal=journal,
            )
            record.extra["usage"] = usage_of_calls(calls + call_rows(spent, prices, attempt), prices)
            return RunOutcome(record, [])
        except INFRASTRUCTURE_ERRORS as exc:
            error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
            failed_exchanges = getattr(exc, "exchanges", [])  # what the last attempt sent and got, for replay
            calls += call_rows(spent, prices, attempt)  # a failed attempt's calls were paid for too
        except EndpointStopped as exc:  # never retried, never RUN_ERROR: the cell stays missing
            calls += call_rows(spent, prices, attempt)
            extra = {
                "exchanges": exc.exchanges,
                "usage": usage_of_calls(calls, prices),
                "endpoint": replay.endpoint_label if replay is not None else _endpoint_label(),
            }
            record = unscored_record(spec, f"stopped: {exc.failure.message}", extra)
            return RunOutcome(record, [], exc.failure.as_dict())
        except CellFailed as exc:  # the same request would be refused again: no retry-once
            error, failed_exchanges = f"attempt {attempt}: {exc.failure.message}", exc.exchanges
            calls += call_rows(spent, prices, attempt)
            break
        except (TeamCodeError, ProjectError) as exc:
            error = str(exc)
            calls += call_rows(spent, prices, attempt)
            break
    extra = {"exchanges": failed_exchanges} if failed_exchanges else {}
    extra["endpoint"] = replay.endpoint_label if replay is not None else _endpoint_label()
    extra["usage"] = usage_of_calls(calls, prices)
    record = unscored_record(spec, error, extra)
    return RunOutcome(record, [])


def _endpoint_label() -> str:
    provider = provider_from_env("", "")
    return provider.label if provider else SIMULATION


def usage_of_calls(rows: list[dict], prices: PriceTable) -> dict:
    """The run's model usage and cost, every attempt's calls included (what a built-in run records)."""
    return {**totals(rows, prices.source), "per_call": rows}
