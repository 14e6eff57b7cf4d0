"""The scripted Magentic orchestrator: facts, plan, progress ledger, re-plan facts/plan updates and
the final answer, in the shapes both Magentic-One (autogen-agentchat 0.7.5) and the pinned Agent
Framework Magentic (agent-framework-orchestrations 1.0.1, whose StandardMagenticManager mirrors the
Magentic-One prompts) parse.

Recognised from the last message of a request that carries no role-naming system prompt (neither
orchestrator sends one), by the fixed texts of `_magentic_one/_prompts.py` (the same texts in
`agent_framework_orchestrations/_magentic.py`). Everything else returns None, so the worker's own
calls go to the normal policy. A participant's turn is a message carrying its name: a `user`
message in Magentic-One, an `assistant` one in Agent Framework, whose own messages are authored
`magentic_manager`.

Ledger behaviour, from what the request shows (never the oracle): the worker is instructed until it
has produced an artifact; the latest artifact is reviewed with `skills.review` (the task's SOURCE and
CONTEXT as the ledger prompt shows them, the artifact as the DRAFT); visible conflicts are noticed and
acted on with the policy's seeded probabilities by instructing one revision (a REVIEWER FEEDBACK
block the worker follows); otherwise the request is marked satisfied. On a seeded share of runs the
orchestrator reports no progress on its first ledgers, so a stall re-plan happens on clean runs too
(the wave-2 stall-noise finding). The final answer restates the latest artifact under the contract,
with the FLAGS line as line 1 when the contract asks for one (artifact-head form).
"""

import json
import random
import re

from adapters import prompts
from adapters.scripted import skills
from adapters.scripted.reply import Reply
from sabot import tasks

FACTS = "Before we begin addressing the request, please answer the following pre-survey"
PLAN = "please devise a short bullet-point plan"
LEDGER = "Please output an answer in pure JSON format according to the following schema"
FACTS_UPDATE = "It's clear we aren't making as much progress as we would like"
AF_FACTS_UPDATE = "It is clear we are not making as much progress as we would like"  # Agent Framework's wording
PLAN_UPDATE = "Please briefly explain what went wrong on this last run"
FINAL = "Based on the information gathered, provide the final answer to the original request."
NAMES = re.compile(r"Who should speak next\? \(select from: ([^)]*)\)")
ORCHESTRATOR = "MagenticOneOrchestrator"
AF_MANAGER = "magentic_manager"  # the Agent Framework manager's author name
FEEDBACK = "=== REVIEWER FEEDBACK ==="
FLAGS_CONTRACT = "beginning 'FLAGS: '"  # the artifact-head FLAGS line in the OUTPUT CONTRACT (wave 2)
REPLANNED = "The last run stalled"  # in the re-plan's plan, so in the second task ledger
STALLING_RUNS = 0.25  # share of runs whose orchestrator reports no progress at first (stall noise)
STALL_LEDGERS = 3  # = max_stalls: enough no-progress ledgers for one re-plan


def _last_text(request: dict) -> str:
    messages = request.get("messages") or []
    return prompts.message_text(messages[-1]) if messages else ""


def _task_of(text: str) -> str | None:
    """The task whose published output contract the request quotes."""
    for task_id in tasks.TASK_IDS:
        if tasks.served(task_id).output_contract["text"] in text:
            return task_id
    return None


def _worker_turns(request: dict, names: list[str]) -> list[str]:
    """What the participants said, oldest first (messages with a participant's name)."""
    return [
        prompts.message_text(m)
        for m in request.get("messages") or []
        if m.get("role") in ("user", "assistant") and m.get("name") in names
    ]


def _instructions(request: dict, names: list[str]) -> list[str]:
    """The orchestrator's own broadcast instructions so far (its assistant messages, no participant's)."""
    return [
        prompts.message_text(m)
        for m in request.get("messages") or []
        if m.get("role") == "assistant" and m.get("name") not in names
    ]


def _entry(reason: str, answer) -> dict:
    return {"reason": reason, "answer": answer}


def _ledger(satisfied, satisfied_why, loop, progress, progress_why, speaker, instruction) -> Reply:
    return Reply(
        content=json.dumps(
            {
                "is_request_satisfied": _entry(satisfied_why, satisfied),
                "is_in_loop": _entry(
                    "The same instruction and the same reply have repeated." if loop else "No repetition so far.", loop
                ),
                "is_progress_being_made": _entry(progress_why, progress),
                "next_speaker": _entry("The worker writes the artifact.", speaker),
                "instruction_or_question": _entry("The next step of the plan.", instruction),
            }
        )
    )


def _review(task_id: str, text: str, artifact: str):
    blocks = prompts.sections(text)
    material = "\n\n".join(
        [
            prompts.block("SOURCE", blocks.get("SOURCE", "")),
            prompts.block("CONTEXT", blocks.get("CONTEXT", "")),
            prompts.block("DRAFT", artifact),
        ]
    )
    return skills.review(task_id, [{"role": "user", "content": material}])


def _quoted(conflict) -> str:
    return f"{conflict.description} ({' vs '.join(chr(34) + q + chr(34) for q in conflict.quotes)})"


def stalling_run(policy) -> bool:
    return random.Random(f"{policy.seed_key}|magentic-stall").random() < STALLING_RUNS


def respond(request: dict, policy, rng: random.Random) -> Reply | None:
    messages = request.get("messages") or []
    if skills.identify(messages) is not None:
        return None  # a worker or reviewer: the normal policy answers
    last = _last_text(request)
    if LEDGER in last:
        return _progress_ledger(request, last, policy, rng)
    if FACTS in last:
        return Reply(
            content="1. GIVEN OR VERIFIED FACTS\n- The request supplies SOURCE and CONTEXT material and an OUTPUT CONTRACT.\n\n"
            "2. FACTS TO LOOK UP\n- None: everything needed is in the request.\n\n"
            "3. FACTS TO DERIVE\n- The artifact's values, from SOURCE and CONTEXT.\n\n"
            "4. EDUCATED GUESSES\n- None."
        )
    if PLAN in last or PLAN_UPDATE in last:
        lead = f"{REPLANNED}: the worker was asked for the same thing repeatedly.\n\n" if PLAN_UPDATE in last else ""
        return Reply(
            content=lead
            + "- Ask the worker to write the artifact from SOURCE and CONTEXT, following the OUTPUT CONTRACT.\n"
            "- Check the artifact against SOURCE, CONTEXT and the contract; ask for one revision if needed."
        )
    if FACTS_UPDATE in last or AF_FACTS_UPDATE in last:
        return Reply(
            content="1. GIVEN OR VERIFIED FACTS\n- The request supplies SOURCE, CONTEXT and an OUTPUT CONTRACT.\n\n"
            "2. FACTS TO LOOK UP\n- None.\n\n3. FACTS TO DERIVE\n- The artifact's values.\n\n"
            "4. EDUCATED GUESSES\n- The worker needs one direct, complete instruction."
        )
    if FINAL in last:
        return _final_answer(request, policy, rng)
    return None


def _progress_ledger(request: dict, last: str, policy, rng: random.Random) -> Reply:
    m = NAMES.search(last)
    names = [n.strip() for n in m.group(1).split(",")] if m else []
    speaker = names[0] if names else "worker"
    task_id = _task_of(last)
    turns = _worker_turns(request, names)
    ask = "Write the artifact now from SOURCE and CONTEXT, exactly as the OUTPUT CONTRACT specifies."
    replanned = any(REPLANNED in t for t in _instructions(request, names))
    if stalling_run(policy) and not replanned and 0 < len(turns) <= STALL_LEDGERS:
        return _ledger(
            False,
            "The artifact has not been confirmed yet.",
            True,
            False,
            "The worker's replies are not moving the request forward.",
            speaker,
            ask,
        )
    if not turns or task_id is None:
        return _ledger(False, "No artifact has been produced yet.", False, True, "Just starting.", speaker, ask)
    artifact = tasks.strip_flags_head(turns[-1])
    found = _review(task_id, last, artifact)
    b = policy.behaviour
    revised = any(FEEDBACK in i for i in _instructions(request, names))
    noticed = [c for c in found.conflicts if rng.random() < b.notice_conflict]
    problems = list(found.contract) if found.contract and rng.random() < b.act_on_contract else []
    acted = [c for c in noticed if rng.random() < b.act_on_conflict]
    if not revised and (acted or problems):
        feedback = "; ".join([_quoted(c) for c in acted] + problems)
        instruction = f"Revise the artifact.\n{prompts.block('REVIEWER FEEDBACK', feedback)}\n{ask}"
        return _ledger(
            False,
            f"The artifact has a problem: {feedback}",
            False,
            True,
            "An artifact exists and needs one revision.",
            speaker,
            instruction,
        )
    why = (
        "The worker produced the artifact and it meets the OUTPUT CONTRACT."
        if not found.contract
        else "The worker produced the artifact; no further revision is planned."
    )
    return _ledger(True, why, False, True, "The artifact is complete.", speaker, "No further work is needed.")


def _final_answer(request: dict, policy, rng: random.Random) -> Reply:
    texts = [prompts.message_text(m) for m in request.get("messages") or []]
    whole = "\n\n".join(texts)
    task_id = _task_of(whole)
    turns = [
        prompts.message_text(m)
        for m in request.get("messages") or []
        if m.get("role") in ("user", "assistant") and m.get("name") not in (None, ORCHESTRATOR, AF_MANAGER, "user")
    ]
    artifact = tasks.strip_flags_head(turns[-1]) if turns else ""
    if FLAGS_CONTRACT not in whole or task_id is None:
        return Reply(content=artifact)
    found = _review(task_id, whole, artifact)
    b = policy.behaviour
    reported = [c for c in found.conflicts if rng.random() < b.notice_conflict * b.report_noticed]
    flags = "FLAGS: " + ("; ".join(_quoted(c) for c in reported) if reported else "none")
    return Reply(content=f"{flags}\n{artifact}")


def intent_of(request: dict, reply: Reply) -> dict:
    """What the orchestrator decided, for the intent log (the scorer never reads it): a stalling
    ledger, a revision it instructed, a re-plan, or the final answer's FLAGS line."""
    last, text = _last_text(request), reply.content or ""
    if LEDGER in last:
        ledger = json.loads(text)
        stalled = not ledger["is_progress_being_made"]["answer"]
        instructed = FEEDBACK in ledger["instruction_or_question"]["answer"]
        return {
            "decision": "stall" if stalled else "revise" if instructed else "ledger",
            "acted": False,
            "reason": ledger["is_request_satisfied"]["reason"] if instructed else None,
        }
    if PLAN_UPDATE in last:
        return {"decision": "replan", "acted": False}
    if FINAL in last:
        head = text.splitlines()[0] if text else ""
        return {"decision": "final", "acted": False, "flags_line": head if head.startswith("FLAGS:") else None}
    return {"decision": "plan", "acted": False}
