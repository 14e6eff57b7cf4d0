"""What every runner shares, in a leaf module: a run's outcome and the errors that mean the endpoint,
not the pipeline, failed. The built-in runner (`adapters.runner`) and a team's project runner
(`adapters.byo.runner`, a plug-in) both import it; neither imports the other."""

from dataclasses import dataclass

from sabot.trace import RunRecord


@dataclass(frozen=True)
class RunOutcome:
    record: RunRecord
    intent: list  # what the scripted model decided and why (empty against a real provider)
    stop: dict | None = None  # the endpoint may not be called (a ProviderFailure as a dict): the cell stays missing


def unscored_record(spec, error: str, extra: dict) -> RunRecord:
    """The record of a run that produced no events (it failed or was stopped): `error` says why, `extra`
    keeps its calls and exchanges. `spec`: either runner's RunSpec (run_id, framework, config, task,
    operator, seed)."""
    return RunRecord(
        spec.run_id,
        spec.framework,
        spec.config,
        spec.task,
        spec.operator,
        spec.seed,
        (),
        None,
        False,
        False,
        error,
        extra=extra,
    )


def infrastructure_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean the endpoint, not the pipeline, failed: a RUN_ERROR, never a miss.

    Built on first use: importing the OpenAI client costs over a second, and the asset definitions
    (which import the runner) are loaded by every command, scoring ones included."""
    import httpx
    import openai

    return (
        openai.APIConnectionError,
        openai.APITimeoutError,
        openai.InternalServerError,
        openai.RateLimitError,
        httpx.HTTPError,
        ConnectionError,
        TimeoutError,
    )


def __getattr__(name: str):
    if name == "INFRASTRUCTURE_ERRORS":  # the name runners import (PEP 562: resolved on import)
        return infrastructure_errors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
