"""The model gateway: every model call of a run passes through it (retries, limits, usage, record, replay)."""

from adapters.gateway.policy import CallPolicy, RateLimit
from adapters.gateway.server import GATEWAY_KEY, CallBudgetSpent, ModelGateway, ReplayMiss, Upstream

__all__ = ["CallPolicy", "RateLimit", "GATEWAY_KEY", "CallBudgetSpent", "ModelGateway", "ReplayMiss", "Upstream"]
