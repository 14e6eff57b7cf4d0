"""Judge backends: the Claude CLI (the spec's judge), an OpenAI-compatible endpoint, and the offline simulation."""

from judges.soft.backends.base import JudgeBackend, JudgeBackendError, SandboxViolation

__all__ = ["JudgeBackend", "JudgeBackendError", "SandboxViolation"]
