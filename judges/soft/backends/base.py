"""What every judge backend provides, and the errors a backend may raise.

A backend turns one prompt into one reply string; it never parses the reply (`judges.soft.verdict`
does, the same way for every backend, the offline simulation included).

Errors:
  * `JudgeBackendError` -- the call itself failed (timeout, non-zero exit, HTTP error, empty reply).
    `judge_cell` counts it as a failed attempt: retried once, then the cell is `judge_excluded`.
  * `SandboxViolation` -- the pre-batch probe failed. Never swallowed: `judge_batch` refuses the
    whole batch and nothing is scored.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class JudgeBackendError(RuntimeError):
    """One judge call failed before producing a reply."""


class SandboxViolation(RuntimeError):
    """The judge's sandbox probe failed; `arm` names where (e.g. "working directory", "outside path")."""

    def __init__(self, arm: str, detail: str):
        super().__init__(f"judge sandbox violation [{arm}]: {detail}")
        self.arm, self.detail = arm, detail


@runtime_checkable
class JudgeBackend(Protocol):
    name: str  # e.g. "claude-cli", "openai-compatible", "offline"

    @property
    def version(self) -> str:
        """What served the verdicts (CLI version and model, served model id, rule version)."""
        ...

    @property
    def label(self) -> str:
        """A human label for reports; the offline judge says "offline-deterministic (simulation)"."""
        ...

    def complete(self, prompt: str) -> str:
        """The raw reply to one prompt; raises JudgeBackendError when the call fails."""
        ...

    def assert_sandboxed(self) -> None:
        """Run before each batch; raises SandboxViolation when the judge can reach what it must not."""
        ...
