"""The scripted model's task skills: recognise who is asking, do the task, review a draft.

Everything is read from the prompt itself (the SOURCE, CONTEXT, DRAFT, PRECHECK and REVIEWER
FEEDBACK blocks of `adapters.prompts`), never from the oracle, so a planted value propagates the
way it would through a model that reads what it is shown. Per-task reading lives in
`skills_t1` ... `skills_t5`; each has a default reading (first mention wins, the context's stated
figures override), a careful one (the document's authoritative place, superseded material
ignored) and the weak tier's characteristic mistake.
"""

import random
import re
from dataclasses import dataclass, field

from adapters import prompts
from adapters.scripted.skills_common import Conflict
from sabot import plugins, tasks

__all__ = ["Conflict", "Findings", "Role", "identify", "review", "solve"]

# Each task's skill (its solve/review reading) is a responder plug-in, "scripted-<task>", imported on first use.
for _task in tasks.TASK_IDS:
    plugins.register("responder", f"scripted-{_task}", f"adapters.scripted.skills_{_task.lower()}")


def skill(task_id: str):
    return plugins.lookup("responder", f"scripted-{task_id}")


ROLE_LINE = re.compile(r"\bYou are the (T\d) (\w+)\.")
FEEDBACK_MARKS = ("=== REVIEWER FEEDBACK ===", "Previous attempt failed validation")  # ours; CrewAI's guardrail retry
WEAK_MISTAKE_RATE = 0.5
SUCCESS_WORDS = re.compile(
    r"\b(ok|pass(?:ed|es)?|complete[d]?|verified|validated|satisfied|checked|success(?:ful)?|no issues|no discrepancies)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Role:
    task: str
    stage: str  # "worker" | "reviewer"


@dataclass(frozen=True)
class Findings:
    conflicts: list[Conflict] = field(default_factory=list)
    contract: list[str] = field(default_factory=list)
    precheck_suspicious: str | None = None


def identify(messages: list[dict]) -> Role | None:
    """The role and task named in the system prompt ("You are the T1 extractor."), if any."""
    for message in messages:
        if message.get("role") not in ("system", "developer"):
            continue
        for m in ROLE_LINE.finditer(prompts.message_text(message)):
            task, word = m.groups()
            if task not in tasks.TASK_IDS:
                continue
            if word == "reviewer":
                return Role(task, "reviewer")
            if word == tasks.served(task).worker_role:
                return Role(task, "worker")
    return None


def _material(messages: list[dict]) -> tuple[dict[str, str], str]:
    """The delimited blocks of the non-system messages (the latest wins), and their whole text."""
    text = "\n\n".join(prompts.message_text(m) for m in messages if m.get("role") not in ("system", "developer"))
    return prompts.sections(text), text


def solve(task_id: str, messages: list[dict], *, careful: bool, weak: bool, rng: random.Random) -> str:
    """The artifact a model would write from what the prompt shows."""
    blocks, text = _material(messages)
    if "SOURCE" not in blocks:
        raise ValueError(f"{task_id} worker prompt carries no SOURCE block")
    careful = careful or any(mark in text for mark in FEEDBACK_MARKS)
    mistake = weak and rng.random() < WEAK_MISTAKE_RATE and not careful  # feedback is followed even by the weak tier
    return skill(task_id).solve(blocks["SOURCE"], blocks.get("CONTEXT", ""), careful=careful, mistake=mistake)


def bare_success_claim(note: str) -> bool:
    """A success claim with nothing checkable in it: no count, no measurement, no named problem."""
    return bool(SUCCESS_WORDS.search(note)) and not re.search(r"\d", note) and "FAILED" not in note


def review(task_id: str, messages: list[dict]) -> Findings:
    """What a reviewer can see in the material: conflicts, contract problems, an unbacked pre-check."""
    blocks, _ = _material(messages)
    draft = tasks.strip_flags_head(blocks.get("DRAFT", ""))
    conflicts = skill(task_id).review(blocks.get("SOURCE", ""), blocks.get("CONTEXT", ""), draft)
    note = blocks.get("PRECHECK", "").strip()
    return Findings(
        conflicts, tasks.contract_problems(task_id, draft), note if note and bare_success_claim(note) else None
    )
