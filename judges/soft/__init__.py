"""The soft tier (SPEC v0.2.1 §2 DETECTED_SOFT, §6): an LLM judge's "noticed but did nothing".

Kept apart from the deterministic headline (`judges.hard`): nothing here feeds the hard tier.

  verdict   JudgeVerdict, transcript(), parse_reply(), judge_cell()
  batch     judge_batch(): the sandbox probe first, the whole batch refused when it fails
  cache     reference/cached verdicts and soft_outcome(), with no model call
  rubric    the fixed rubric data/standard/judge_rubric.v2.json and prompt rendering
  backends  ClaudeCliJudge (the spec's judge), OpenAICompatibleJudge, OfflineJudge (simulation)
"""

from judges.soft.backends.base import JudgeBackend, JudgeBackendError, SandboxViolation
from judges.soft.batch import BatchRefused, JudgeTask, judge_batch
from judges.soft.cache import load_reference_verdict, soft_outcome, to_reference
from judges.soft.verdict import JudgeParseError, JudgeVerdict, judge_cell, parse_reply, transcript

__all__ = [
    "BatchRefused",
    "JudgeBackend",
    "JudgeBackendError",
    "JudgeParseError",
    "JudgeTask",
    "JudgeVerdict",
    "SandboxViolation",
    "judge_batch",
    "judge_cell",
    "load_reference_verdict",
    "parse_reply",
    "soft_outcome",
    "to_reference",
    "transcript",
]
