"""The model gateway: every model call of a run passes through it (retries, limits, usage, record, replay)."""

from adapters.gateway.policy import CallPolicy, RateLimit
from adapters.gateway.server import (
    GATEWAY_KEY,
    CallBudgetSpent,
    CellFailed,
    EndpointStopped,
    ModelGateway,
    ReplayMiss,
    Upstream,
    circuit_of,
)
from adapters.gateway.taxonomy import ProviderFailure, ProviderTaxonomy

__all__ = [
    "CallPolicy",
    "RateLimit",
    "GATEWAY_KEY",
    "CallBudgetSpent",
    "CellFailed",
    "EndpointStopped",
    "ModelGateway",
    "ReplayMiss",
    "Upstream",
    "circuit_of",
    "ProviderFailure",
    "ProviderTaxonomy",
]
