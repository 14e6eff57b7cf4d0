"""Judging a batch of cells behind the pre-batch sandbox probe (SPEC v0.2.1 §6).

The probe (`backend.assert_sandboxed()`) runs before the first cell of every batch. If it fails --
a canary leaked, or the judge executable is missing or broken -- the whole batch is refused with
`BatchRefused` and nothing is judged: no partial batch, no verdict from an unsandboxed judge.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from judges.soft.backends.base import JudgeBackend, JudgeBackendError, SandboxViolation
from judges.soft.rubric import Rubric
from judges.soft.verdict import JudgeVerdict, judge_cell
from sabot.trace import RunRecord


class BatchRefused(RuntimeError):
    """The pre-batch probe failed; `cause` is the SandboxViolation (or backend failure) behind it."""

    def __init__(self, backend: str, cause: Exception):
        super().__init__(f"judge batch refused, nothing scored: backend {backend}: {cause}")
        self.backend, self.cause = backend, cause


class JudgeTask(NamedTuple):
    record: RunRecord
    ground_truth: str
    variant: int = 0


def judge_batch(
    backend: JudgeBackend, cells: Iterable[JudgeTask | tuple], rubric: Rubric | None = None
) -> list[JudgeVerdict]:
    """Probe the sandbox, then judge every cell in order; raises BatchRefused when the probe fails.

    `cells` are (record, ground_truth[, variant]) tuples; the probe runs before any cell is read.
    """
    try:
        backend.assert_sandboxed()
    except (SandboxViolation, JudgeBackendError) as exc:
        raise BatchRefused(backend.name, exc) from exc
    return [judge_cell(backend, *JudgeTask(*cell), rubric=rubric) for cell in cells]
