"""The call policy: how long a model call may take, how often it is retried, and how fast an
endpoint may be called. Read from the registered `standard/call_policy.v2.json` (v1 stays registered:
the policy of the runs recorded before v2); a deployment (or a test) may point SABOT_CALL_POLICY at
a JSON file whose keys override the registered ones.

v3 adds the registered per-call completion limit (`standard/spend_margin.v1.json`), sent as
`max_tokens` on every call, a total timeout per attempt, and endpoint profiles: `for_endpoint` lays
the `local_model` profile over the policy for a local model server (its own timeouts, completion
limit, a host-wide concurrency cap, and no retry of a timed-out call the server is still answering).

v2 adds hang detection (a connect timeout and a time-to-first-byte timeout beside the call timeout),
the endpoint breaker (K failed attempts in a row, from any process on the host, open the endpoint)
and reads `max_retry_after_seconds` as a ceiling: a shorter Retry-After is waited out by every
process on the host, a longer one stops the wave naming the header.

Retries here are transport retries, invisible to the pipeline: they are never an own-check act
(SPEC v0.2.1 §2 counts only the pipeline's own retry mechanisms). A run fails as infrastructure only
once this budget is spent; the runner's §3 retry-once applies after that.
"""

from __future__ import annotations

import json
import os
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

POLICY_DOC = "standard/call_policy.v3.json"
MARGIN_DOC = "standard/spend_margin.v1.json"  # where the per-call completion limit is registered
LOCAL_MODEL_PROFILE = "local_model"
POLICY_ENV = "SABOT_CALL_POLICY"


@dataclass(frozen=True)
class RateLimit:
    requests: int | None  # per window
    tokens: int | None  # per window (prompt estimate plus any requested completion cap)
    window_seconds: float = 60.0


@dataclass(frozen=True)
class CallPolicy:
    max_attempts: int
    max_total_seconds: float
    initial_backoff_seconds: float
    max_backoff_seconds: float
    jitter_seconds: float
    max_retry_after_seconds: float
    retry_on_status: frozenset[int]
    call_timeout_seconds: float
    run_wall_limit_seconds: float
    limits: dict[str, RateLimit | None]  # "provider" | "scripted" -> limit (None: unlimited)
    connect_timeout_seconds: float = 10.0
    first_byte_timeout_seconds: float = 120.0  # no byte of the answer this long after sending: a hang
    breaker_failures: int = 8  # failed attempts in a row that open the endpoint for the host
    breaker_open_seconds: float = 900.0
    total_timeout_seconds: float | None = None  # one attempt, first byte to last (None: the call timeout)
    max_completion_tokens: int | None = None  # sent as max_tokens on every call (None: none sent)
    max_concurrent_calls: int | None = None  # calls in flight to the endpoint, host-wide (None: no cap)
    retry_timeouts: bool = True  # False: a timed-out call is not sent again (the server may still be answering it)
    profiles: dict = field(default_factory=dict, compare=False)  # endpoint kind -> keys laid over this policy

    def for_endpoint(self, local_model: bool) -> "CallPolicy":
        """The policy for one endpoint: a local model server's profile laid over the rest."""
        profile = self.profiles.get(LOCAL_MODEL_PROFILE) if local_model else None
        if not profile:
            return self
        fields = {k: v for k, v in profile.items() if k in _PROFILE_FIELDS}
        return dataclasses.replace(self, **fields, profiles={})

    @property
    def client_timeout(self) -> float:
        """The framework clients' own timeout: longer than the gateway's whole budget for one call,
        so a client never gives up while the gateway is still retrying for it."""
        return self.max_total_seconds + self.call_timeout_seconds + 10.0

    def limit_for(self, scripted: bool) -> RateLimit | None:
        return self.limits.get("scripted" if scripted else "provider")

    def http_timeout(self, seconds_left: float):
        """httpx's timeout for one attempt: connect and first byte (read) bounded apart, so a provider
        that accepts and never answers is a timeout after first_byte_timeout_seconds, not minutes."""
        import httpx

        cap = max(0.1, min(self.call_timeout_seconds, seconds_left))
        return httpx.Timeout(
            cap, connect=min(self.connect_timeout_seconds, cap), read=min(self.first_byte_timeout_seconds, cap)
        )

    @classmethod
    def from_doc(cls, doc: dict, source: str = POLICY_DOC) -> "CallPolicy":
        try:
            retry = doc["retry"]
            limits = {name: _limit(v) for name, v in (doc.get("limits") or {}).items()}
            policy = cls(
                max_attempts=int(retry["max_attempts"]),
                max_total_seconds=float(retry["max_total_seconds"]),
                initial_backoff_seconds=float(retry["initial_backoff_seconds"]),
                max_backoff_seconds=float(retry["max_backoff_seconds"]),
                jitter_seconds=float(retry["jitter_seconds"]),
                max_retry_after_seconds=float(retry["max_retry_after_seconds"]),
                retry_on_status=frozenset(int(s) for s in retry["retry_on_status"]),
                call_timeout_seconds=float(doc["call_timeout_seconds"]),
                run_wall_limit_seconds=float(doc["run_wall_limit_seconds"]),
                limits=limits,
                connect_timeout_seconds=float(
                    doc.get("connect_timeout_seconds", min(10.0, float(doc["call_timeout_seconds"])))
                ),
                first_byte_timeout_seconds=float(doc.get("first_byte_timeout_seconds", doc["call_timeout_seconds"])),
                breaker_failures=int((doc.get("breaker") or {}).get("consecutive_failures", 8)),
                breaker_open_seconds=float((doc.get("breaker") or {}).get("open_seconds", 900.0)),
                total_timeout_seconds=_number(doc.get("total_timeout_seconds"), float),
                max_completion_tokens=_number(doc.get("max_completion_tokens"), int),
                max_concurrent_calls=_number(doc.get("max_concurrent_calls"), int),
                retry_timeouts=bool(doc.get("retry_timeouts", True)),
                profiles={name: _profile(name, p) for name, p in (doc.get("profiles") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{source}: malformed call policy ({type(exc).__name__}: {exc})") from None
        if policy.max_attempts < 1 or policy.max_total_seconds <= 0 or policy.call_timeout_seconds <= 0:
            raise ValueError(f"{source}: max_attempts, max_total_seconds and call_timeout_seconds must be positive")
        if policy.connect_timeout_seconds <= 0 or policy.first_byte_timeout_seconds <= 0 or policy.breaker_failures < 1:
            raise ValueError(
                f"{source}: connect and first-byte timeouts and breaker.consecutive_failures must be positive"
            )
        for candidate in (policy, policy.for_endpoint(local_model=True)):
            if any(v is not None and v < 1 for v in (candidate.max_completion_tokens, candidate.max_concurrent_calls)):
                raise ValueError(
                    f"{source}: max_completion_tokens and max_concurrent_calls must be at least 1 when set"
                )
        return policy

    @property
    def attempt_seconds(self) -> float:
        """How long one attempt may take from sending to its last byte."""
        return self.total_timeout_seconds or self.call_timeout_seconds

    @classmethod
    def load(cls, registry, environ=os.environ) -> "CallPolicy":
        """The registered policy, with the keys of SABOT_CALL_POLICY's file laid over it."""
        doc = json.loads(json.dumps(registry.doc(POLICY_DOC)))
        doc.setdefault(
            "max_completion_tokens", registry.doc(MARGIN_DOC)["pilot_run_bounds"]["max_completion_tokens_per_call"]
        )
        override_path = environ.get(POLICY_ENV)
        if not override_path:
            return cls.from_doc(doc)
        try:
            override = json.loads(Path(override_path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{POLICY_ENV}={override_path}: cannot read the call policy ({exc})") from None
        for key, value in override.items():
            doc[key] = {**doc[key], **value} if isinstance(value, dict) and isinstance(doc.get(key), dict) else value
        return cls.from_doc(doc, f"{POLICY_DOC} + {override_path}")


_PROFILE_FIELDS = {
    "max_concurrent_calls": int,
    "max_completion_tokens": int,
    "first_byte_timeout_seconds": float,
    "total_timeout_seconds": float,
    "call_timeout_seconds": float,
    "connect_timeout_seconds": float,
    "max_total_seconds": float,
    "max_attempts": int,
    "retry_timeouts": bool,
}


def _number(value, kind):
    return None if value is None else kind(value)


def _profile(name: str, value) -> dict:
    """A profile's keys, typed; a key the policy does not know is named, never ignored."""
    if not isinstance(value, dict):
        raise TypeError(f"profile {name!r} is not an object")
    unknown = sorted(set(value) - set(_PROFILE_FIELDS) - {"why"})
    if unknown:
        raise KeyError(f"profile {name!r} has unknown key(s) {', '.join(unknown)}")
    return {k: _PROFILE_FIELDS[k](v) for k, v in value.items() if k != "why"}


def _limit(value) -> RateLimit | None:
    if value is None:
        return None
    requests, tokens = value.get("requests_per_window"), value.get("tokens_per_window")
    return RateLimit(
        int(requests) if requests else None, int(tokens) if tokens else None, float(value.get("window_seconds", 60))
    )
