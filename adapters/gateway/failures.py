"""What a run's gateway raises and answers when a call fails: the errors a runner catches after the
pipeline (CallBudgetSpent, EndpointStopped, CellFailed, ReplayMiss), the two the call policy acts on
within one call (_Stop, _Retryable), and the JSON error body a client is answered with."""

from __future__ import annotations

import json

from adapters.gateway.taxonomy import ProviderFailure

RUN_BOUND = "run_bound"  # a call the run's registered bound (sabot.budget.RunBound) does not let through


class CallBudgetSpent(ConnectionError):
    """A model call failed after the policy's whole budget: the run failed for infrastructure."""

    def __init__(self, message: str, exchanges: list[dict]):
        super().__init__(message)
        self.exchanges = exchanges


class EndpointStopped(RuntimeError):
    """The endpoint may not be called (key refused, quota spent, breaker open, Retry-After past the
    ceiling): the run stops, its cell stays missing for resume, never RUN_ERROR. Plain data: it
    crosses process boundaries whole."""

    def __init__(self, failure: ProviderFailure, exchanges: list[dict] | None = None):
        super().__init__(failure.message)
        self.failure, self.exchanges = failure, list(exchanges or [])

    def __reduce__(self):
        return type(self), (self.failure, self.exchanges)


class CellFailed(RuntimeError):
    """The provider refused this run's request for good (a model it lacks, a body it rejects): the run
    is RUN_ERROR naming the model and the provider's message, never retried; its neighbours go on."""

    def __init__(self, failure: ProviderFailure, exchanges: list[dict] | None = None):
        super().__init__(failure.message)
        self.failure, self.exchanges = failure, list(exchanges or [])

    def __reduce__(self):
        return type(self), (self.failure, self.exchanges)


class ReplayMiss(RuntimeError):
    """A replayed run asked for an exchange its recording does not hold (never an infrastructure error:
    it must stop the replay, not be retried or stored as RUN_ERROR)."""


class _Stop(Exception):
    def __init__(self, failure: ProviderFailure, response=None):
        super().__init__(failure.message)
        self.failure, self.response = failure, response


class _Retryable(Exception):
    def __init__(
        self,
        detail: str,
        status: int | None = None,
        retry_after: float | None = None,
        response=None,
        final: bool = False,
    ):
        super().__init__(detail)
        self.detail, self.status, self.retry_after, self.response = detail, status, retry_after, response
        self.final = (
            final  # the policy says not to send this call again (a timed-out call the server is still answering)
        )


def error_body(message: str, kind: str = "gateway_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
