"""The scripted model's answer to CrewAI's LLM guardrail (crewai.tasks.llm_guardrail.LLMGuardrail).

CrewAI 1.15.5 runs a string guardrail as a "Guardrail Agent" whose request carries
`response_format = {"type": "json_schema", "json_schema": {"name": "LLMGuardrailResult", ...}}`;
the schema is `LLMGuardrailResult(valid: bool, feedback: str | None)`, both required, and the reply
is the raw JSON object as the message content. Every other request is not ours: None.

The guardrail agent sees only the task result and the guardrail description (no SOURCE or
CONTEXT), so it can judge only what the artifact itself shows: the task's output contract, via
`skills.review` on the artifact alone. The task id is read from the guardrail description
("... the T1 extractor's artifact ..."); without one, only a structural non-empty check is made.
Decisions are seeded like a reviewer's (`policy.behaviour.act_on_contract`).
"""

import json
import re

from adapters import prompts
from adapters.scripted import skills
from adapters.scripted.reply import Reply
from sabot import tasks

SCHEMA_NAME = "LLMGuardrailResult"
# crewai/tasks/llm_guardrail.py builds the query as "Task result:\n{raw}\n\nGuardrail:\n{description}\n\nYour task:"
RESULT = re.compile(r"Task result:\n(.*?)\n\s*Guardrail:\n(.*?)\n\s*Your task:", re.DOTALL)
TASK_ID = re.compile(r"\b(T\d)\b")


def is_guardrail_request(request: dict) -> bool:
    fmt = request.get("response_format") or {}
    return fmt.get("type") == "json_schema" and (fmt.get("json_schema") or {}).get("name") == SCHEMA_NAME


def _parts(request: dict) -> tuple[str, str] | None:
    text = "\n".join(prompts.message_text(m) for m in request.get("messages", []) if m.get("role") == "user")
    match = RESULT.search(text)
    if match is None:
        return None
    # the query is an indented f-string: only the artifact's first line carries the indent
    return match.group(1).strip(), match.group(2).strip()


def contract_findings(task_id: str, artifact: str) -> list[str]:
    """What `skills.review` reports about the contract, from the artifact alone.

    `skills.review` also reads the SOURCE for conflicts, and some task readers (T5) cannot read an
    empty source; the guardrail agent is shown no source, so its contract findings are taken alone
    (the same `tasks.contract_problems` call `skills.review` makes on the DRAFT).
    """
    try:
        return skills.review(task_id, [{"role": "user", "content": prompts.block("DRAFT", artifact)}]).contract
    except ValueError:
        return tasks.contract_problems(task_id, tasks.strip_flags_head(artifact))


def decide(request: dict, policy, rng) -> tuple[bool, str | None, dict]:
    parts = _parts(request)
    if parts is None:
        return False, "the guardrail request shows no task result", {"task": None}
    artifact, description = parts
    found = TASK_ID.search(description)
    task_id = found.group(1) if found and found.group(1) in tasks.TASK_IDS else None
    if task_id is None:
        problems = [] if artifact else ["the task result is empty"]
    else:
        problems = contract_findings(task_id, artifact)
    act = bool(problems) and rng.random() < policy.behaviour.act_on_contract
    feedback = problems[0] if act else None
    return not act, feedback, {"task": task_id, "contract_problems": problems, "acted": act}


def respond(request: dict, policy, rng) -> Reply | None:
    if not is_guardrail_request(request):
        return None
    valid, feedback, _ = decide(request, policy, rng)
    return Reply(content=json.dumps({"valid": valid, "feedback": feedback}))


def intent_of(request: dict, reply: Reply) -> dict:
    """What the guardrail decided, for the intent log (the scorer never reads it)."""
    verdict = json.loads(reply.content)
    return {"acted": not verdict["valid"], "reason": verdict["feedback"]}
