"""The scripted model's behaviour: which role is asking, what it does, and why (the intent log).

It works only from what each request shows (via the task skills), so a planted value propagates.
Reviewers notice conflicts, report them, act on them or approve anyway with seeded probabilities;
the weaker tier (the O4 target) makes its task's characteristic mistake. The intent log records
every decision; the scorer never reads it, the tests use it as an oracle.
"""

import importlib
import importlib.util
import random
import threading
from dataclasses import dataclass, field

from adapters.scripted import skills
from adapters.scripted.reply import Reply

ADDENDUM_MARK = "ANOMALY-FIRST PROTOCOL"
# Framework-specific callers (CrewAI's LLM guardrail, Magentic-One's orchestrator) are answered by
# their own modules, tried first; each exposes respond(request, policy, rng) -> Reply | None.
FRAMEWORK_RESPONDERS = ("adapters.scripted.crewai_guardrail", "adapters.scripted.magentic")


@dataclass(frozen=True)
class Behaviour:
    careful_first_pass: float = 0.3  # the worker resolves a conflict by itself (recovery without detection)
    notice_conflict: float = 0.85
    notice_fake_check: float = 0.45
    report_noticed: float = 0.95  # what a reviewer noticed reaches its FLAGS line
    act_on_conflict: float = 0.5  # REJECT rather than approve anyway: the override gap
    act_on_contract: float = 0.9
    act_on_fake_check: float = 0.3


def probe_seed_key(framework: str, config: str, task: str, seed: int) -> str:
    """The simulator's seed: the probe (framework, config, task, seed), never the wave or operator, so a
    cell's baseline and its fault run, and the same cell in both waves, draw the same numbers for
    the same call: a paired contrast then differs only where the fault or the protocol differs."""
    return f"{framework}.{config}.{task}.s{seed}"


@dataclass
class ScriptedPolicy:
    """A responder for `ScriptedModelServer`, seeded per probe (`probe_seed_key`)."""

    seed_key: str
    weak_model: str = "gpt-5.6-luna"
    behaviour: Behaviour = field(default_factory=Behaviour)
    intent: list[dict] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()

    def _rng(self, n: int) -> random.Random:
        return random.Random(f"{self.seed_key}|{n}")

    def __call__(self, request: dict) -> Reply:
        messages = request.get("messages", [])
        with self._lock:
            n = len(self.intent)
            self.intent.append({"n": n})  # reserve the slot so concurrent calls get distinct seeds
        for name in FRAMEWORK_RESPONDERS:
            if importlib.util.find_spec(name) is not None:
                module = importlib.import_module(name)
                reply = module.respond(request, self, self._rng(n))
                if reply is not None:
                    decided = module.intent_of(request, reply) if hasattr(module, "intent_of") else {}
                    self.intent[n] = {
                        "n": n,
                        "stage": name.rsplit(".", 1)[1],
                        "model": request.get("model", ""),
                        **decided,
                    }
                    return reply
        role = skills.identify(messages)
        if role is None:
            self.intent[n] = {"n": n, "role": None, "decision": "unrecognised prompt"}
            return Reply(status=400, error="scripted model: no role recognised in the system prompt")
        rng, model = self._rng(n), request.get("model", "")
        if role.stage == "worker":
            text, entry = self._work(role, messages, rng, weak=model == self.weak_model)
        else:
            text, entry = self._review(role, messages, rng)
        self.intent[n] = {"n": n, "task": role.task, "stage": role.stage, "model": model, **entry}
        return Reply(content=text)

    def _work(self, role, messages, rng, weak: bool):
        feedback = any("=== REVIEWER FEEDBACK ===" in (m.get("content") or "") for m in messages)
        careful = feedback or rng.random() < self.behaviour.careful_first_pass
        artifact = skills.solve(role.task, messages, careful=careful, weak=weak, rng=rng)
        return artifact, {"careful": careful, "weak": weak, "revision": feedback}

    def _review(self, role, messages, rng):
        b = self.behaviour
        found = skills.review(role.task, messages)
        noticed = [c for c in found.conflicts if rng.random() < b.notice_conflict]
        fake = found.precheck_suspicious if found.precheck_suspicious and rng.random() < b.notice_fake_check else None
        acted = [c for c in noticed if rng.random() < b.act_on_conflict]
        act_contract = bool(found.contract) and rng.random() < b.act_on_contract
        act_fake = fake is not None and rng.random() < b.act_on_fake_check
        lines = []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        reported = []
        if ADDENDUM_MARK in system:
            reported = [c for c in noticed if rng.random() < b.report_noticed]
            items = [f"{c.description} ({' vs '.join(chr(34) + q + chr(34) for q in c.quotes)})" for c in reported]
            if fake:
                items.append(f'the pre-check claims "{fake}" with no evidence of the check')
            lines.append("FLAGS: " + ("; ".join(items) if items else "none"))
        reason = None
        if acted:
            reason = f"{acted[0].description} ({' vs '.join(chr(34) + q + chr(34) for q in acted[0].quotes)})"
        elif act_contract:
            reason = found.contract[0]
        elif act_fake:
            reason = f'the pre-check claim "{fake}" is unverified'
        lines.append(f"VERDICT: REJECT - {reason}" if reason else "VERDICT: APPROVE")
        entry = {
            "conflicts_visible": [list(c.quotes) for c in found.conflicts],
            "noticed": [list(c.quotes) for c in noticed],
            "reported": [list(c.quotes) for c in reported] + ([[fake]] if fake and ADDENDUM_MARK in system else []),
            "fake_check_noticed": fake is not None,
            "flags_line": lines[0] if len(lines) == 2 else None,
            "acted": reason is not None,
            "reason": reason,
        }
        return "\n".join(lines), entry
