"""One live run of one cell (or baseline): isolated, retried once on infrastructure failure.

The run gets its own working directory and HOME, its own fault, and (by default) its own scripted
model server seeded by the cell; ground truth stays with the harness (the pass criterion) and never
enters a prompt. The pipeline itself (with its tools and fault) runs confined, in a child of the
sandboxed fork server (adapters/confined_run.py); this process keeps the gateway and its journal. The simulator's intent log is returned beside the run
record, never inside it, so the scorer cannot read it.
"""

import contextlib
import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

from adapters.endpoint import provider_from_env, scripted
from adapters.gateway import (
    GATEWAY_KEY,
    CallPolicy,
    CellFailed,
    EndpointStopped,
    ModelGateway,
    ProviderTaxonomy,
    Upstream,
)
from adapters import pipelines
from adapters.outcome import RunOutcome, infrastructure_errors, unscored_record
from adapters.scripted.policy import ScriptedPolicy, probe_seed_key
from adapters.scripted.latency import Latency
from adapters.scripted.server import ScriptedModelServer
from adapters.confined_run import run_confined_pipeline
from sabot import plugins, tasks
from sabot.model_ids import downgrade_served
from sabot.budget import Margin, RunBound
from sabot.pricing import PriceTable, call_rows, local_price_table, totals
from sabot.trace import EventKind

PIPELINES = pipelines.PIPELINES  # the same registry: a test that patches one pipeline patches both names
# A team's own pipeline (sabot.projects) runs through its own runner, a plug-in too: this module never
# imports it, and it imports only the shared leaf (adapters.outcome) back.
plugins.register("runner", "project", "adapters.byo.runner:run_project")


class PipelineCrashed(RuntimeError):
    """The pipeline raised on something the model answered (an empty reply, a malformed tool call):
    that run's failure, RUN_ERROR naming the exception, never the wave's."""


def _first_line(message: str) -> str:
    text = message.strip()
    return text.splitlines()[0][:300] if text else "(no message)"


class PipelineInfrastructureError(PipelineCrashed):
    """The pipeline's call failed on the endpoint's side (a connection, a timeout, a 5xx): an
    infrastructure failure, raised in the sandbox and named here by the exception's own type."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class AdapterMissing(NotImplementedError):
    """A framework whose adapter is not built: a definition error, not a run error."""


def pipeline_class(framework: str):
    """The pipeline class of a framework, importing its module (and the framework) on first use."""
    return plugins.lookup("pipeline", framework)


@dataclass(frozen=True)
class RunSpec:
    wave: str
    protocol: int  # 1: wave-1 prompts; 2: the anomaly-first reviewer addendum
    framework: str
    config: str
    task: str
    operator: str | None
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.wave}-{self.framework}-{self.task}-{self.config}-{self.operator or 'baseline'}-s{self.seed}"


@dataclass(frozen=True)
class Recording:
    """A stored run's model exchanges (and what else its record held) for replaying it."""

    exchanges: list
    endpoint_label: str
    intent: list
    source: str = ""  # the stored run replayed (run file @ content hash)


def _execute(
    spec: RunSpec,
    registry,
    run_dir: Path,
    replay: "Recording | None",
    call_policy: CallPolicy | None,
    spent: list,
    bound: RunBound | None = None,
    journal=None,
) -> RunOutcome:
    if spec.framework not in PIPELINES:
        raise AdapterMissing(f"no {spec.framework} adapter yet; runnable frameworks: {', '.join(PIPELINES)}")
    models = registry.doc("standard/models.v0.1.1.json")
    endpoint = provider_from_env(models["pipeline_model"], models["o4_downgrade_model"])
    policy = ScriptedPolicy(
        probe_seed_key(spec.framework, spec.config, spec.task, spec.seed), weak_model=models["o4_downgrade_model"]
    )
    with contextlib.ExitStack() as stack:
        if replay is not None:  # answered from the recording: no scripted server, no provider
            endpoint, upstream = (
                scripted("http://127.0.0.1:9/v1", models["pipeline_model"], models["o4_downgrade_model"]),
                None,
            )
        else:
            if endpoint is None:
                server = stack.enter_context(ScriptedModelServer(policy, latency=Latency.from_env(spec.run_id)))
                endpoint = scripted(server.base_url, models["pipeline_model"], models["o4_downgrade_model"])
            upstream = Upstream(
                endpoint.base_url, endpoint.api_key, endpoint.label, endpoint.scripted, endpoint.local_model
            )
        label = replay.endpoint_label if replay is not None else endpoint.label
        gateway = stack.enter_context(
            ModelGateway(
                upstream,
                call_policy or CallPolicy.load(registry),
                spec.run_id,
                replay.exchanges if replay is not None else None,
                taxonomy=ProviderTaxonomy.load(registry),
                bound=bound,
                journal=journal,
            )
        )
        stack.callback(lambda: spent.extend(gateway.exchanges))  # every call made, whatever the run's end
        # The clients see only the gateway, with a placeholder key and a timeout longer than its budget.
        client_endpoint = dataclasses.replace(
            endpoint, base_url=gateway.base_url, api_key=GATEWAY_KEY, timeout=gateway.policy.client_timeout
        )
        # The pipeline's own code runs in the sandbox (adapters.confined_run); this process keeps the gateway.
        result = run_confined_pipeline(spec, registry, client_endpoint, run_dir)
        if result.error is not None:
            gateway.raise_for_calls()  # the call that failed is the cause, whatever the framework made of it
            if result.error["infrastructure"]:
                raise PipelineInfrastructureError(result.error["kind"], result.error["message"])
            # A framework that cannot handle what the model answered (CrewAI's ValueError on an empty
            # reply) crashed this run, not the wave: RUN_ERROR with its reason (SPEC §3), retried once.
            raise PipelineCrashed(
                f"the {spec.framework} pipeline raised {result.error['kind']}: {_first_line(result.error['message'])}"
            )
        gateway.raise_for_calls()  # a failure a framework swallowed still fails the run
        if replay is not None:
            gateway.raise_for_unused()  # every recorded exchange used, none left over
        exchanges = list(gateway.exchanges)
    recorder = result.recorder
    served = {e.payload.get("model_id") for e in recorder.events if e.kind == EventKind.AGENT_MSG}
    # O4: wave 1's instrument recorded the swap as landed at set-up (no probe, v0.1.3); from wave 2 the
    # downgrade target, or its dated snapshot, must have served a call (§10.7.2).
    landed = result.fault_landed or (
        spec.operator == "O4" and (spec.protocol < 2 or downgrade_served(registry, served))
    )
    passed = tasks.passes(spec.task, run_dir)
    recorder.record("emit", EventKind.VERDICT, task_passed=passed)
    record = recorder.record_of(
        run_id=spec.run_id,
        framework=spec.framework,
        config=spec.config,
        task=spec.task,
        operator=spec.operator,
        seed=spec.seed,
        injection_verified=bool(spec.operator) and landed,
        task_passed=passed,
        error=None,
        extra={"endpoint": label, "exchanges": exchanges, "protocol": spec.protocol},
    )
    if replay is not None:
        return RunOutcome(record, list(replay.intent))
    return RunOutcome(record, policy.intent if endpoint.scripted else [])


def run(
    spec: RunSpec,
    registry,
    work_root: Path,
    replay: "Recording | None" = None,
    call_policy: CallPolicy | None = None,
    journal=None,
) -> RunOutcome:
    """A run, retried once on an infrastructure failure, then recorded as RUN_ERROR (never raised).

    With `replay`, every model call is answered from that recording and nothing is sent anywhere; a
    call it lacks raises ReplayMiss (the replay stops, naming the cell and the call). `journal`
    (sabot.exchange_journal): where each exchange is written before the pipeline gets its answer."""
    if getattr(registry, "project", None) is not None:  # a team's own pipeline (sabot.projects)
        return plugins.lookup("runner", "project")(
            spec,
            registry.project,
            work_root,
            registry=registry,
            replay=replay,
            call_policy=call_policy,
            journal=journal,
        )
    error, failed_exchanges, calls = None, [], []
    provider = provider_from_env("", "")
    # A local model server costs nothing unless its user prices it; a provider is priced at the spec's prices.
    prices = (
        local_price_table() if provider is not None and provider.local_model else PriceTable.from_registry(registry)
    )
    where = provider.label if provider else "the scripted model on 127.0.0.1"
    # A provider run is held to the registered per-run bounds, both attempts together: what a pilot reserves.
    # Offline, the registered call bound alone: a pipeline looping on a persistent fault stops there, not hours later.
    # A local model server's runs are bounded like a provider's, at the spec's prices, never by its $0.
    bound = Margin.from_registry(registry).bound_for(
        PriceTable.from_registry(registry), provider is not None, replay is not None
    )
    for attempt in (1, 2):
        run_dir = Path(work_root) / spec.run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        spent: list = []
        if journal is not None:
            journal.attempt = attempt
        try:
            outcome = _execute(spec, registry, run_dir, replay, call_policy, spent, bound, journal)
            outcome.record.extra["usage"] = _usage(calls + call_rows(spent, prices, attempt), prices)
            return outcome
        except EndpointStopped as exc:  # never retried, never RUN_ERROR: the cell stays missing
            calls += call_rows(spent, prices, attempt)
            return _stopped(spec, exc, calls, prices, replay, provider)
        except CellFailed as exc:  # the same request would be refused again: no retry-once
            calls += call_rows(spent, prices, attempt)
            error, failed_exchanges = f"attempt {attempt}: {exc.failure.message}", exc.exchanges
            break
        except (PipelineCrashed, *infrastructure_errors()) as exc:
            error = f"attempt {attempt}: {exc.kind if isinstance(exc, PipelineInfrastructureError) else type(exc).__name__}: {exc} (endpoint: {where})"
            # What the last attempt sent and got, for replay: the gateway's record when the error does not carry it.
            failed_exchanges = getattr(exc, "exchanges", None) or list(spent)
            calls += call_rows(spent, prices, attempt)  # a failed attempt's calls were paid for too
    extra = {"exchanges": failed_exchanges} if failed_exchanges else {}
    # Where it failed, in the record itself: a provider wave whose every run failed is still no simulation.
    extra["endpoint"] = _failed_endpoint_label(replay, provider)
    extra["usage"] = _usage(calls, prices)
    return RunOutcome(unscored_record(spec, error, extra), [])


def _stopped(spec: RunSpec, exc: EndpointStopped, calls: list, prices: PriceTable, replay, provider) -> RunOutcome:
    """A run the endpoint's stop cut off: its calls (paid or not) are kept, its cell is not scored."""
    extra = {
        "exchanges": exc.exchanges,
        "usage": _usage(calls, prices),
        "endpoint": _failed_endpoint_label(replay, provider),
    }
    return RunOutcome(unscored_record(spec, f"stopped: {exc.failure.message}", extra), [], exc.failure.as_dict())


def _failed_endpoint_label(replay, provider) -> str:
    """Where a run that never finished was sent: the replayed recording's endpoint, the provider, or the scripted model."""
    return replay.endpoint_label if replay is not None else (provider.label if provider else scripted("", "", "").label)


def _usage(rows: list[dict], prices: PriceTable) -> dict:
    """The run's model usage and cost, every attempt's calls included: what its cell metadata shows."""
    return {**totals(rows, prices.source), "per_call": rows}
