"""LangGraph pipelines (langgraph 1.2.9, langchain-openai 1.4.0), default and guardrail configs.

default:    load -> worker -> review -> (revise -> worker ...) | emit   (one revise loop)
guardrail:  ... review -> validate -> emit; the validator checks only the output contract: its
            first failure routes Command(goto="revise"), its second calls interrupt(reason).

Own-check acts are read from the framework's surfaces as the graph streams its node updates: a
review update carrying a REJECT verdict token, a validate update routing to revise, the revise node
re-invoking the worker with the reason, and the `__interrupt__` key. The adapter never asserts an
act the graph did not take.
"""

from typing import Any, TypedDict

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from adapters import prompts
from adapters.gateway.clients import gateway_async_http_client, gateway_http_client
from adapters.tools import TaskTools
from sabot import tasks
from sabot.recorder import Recorder
from sabot.trace import EventKind

INTERRUPT_KEY = "__interrupt__"
MAX_REVISIONS = 1


class State(TypedDict, total=False):
    source: str
    context: str
    draft: str
    received: str  # the draft as handed to the reviewer
    precheck: str
    verdict: str | None
    reason: str | None
    rejected_by: str
    feedback: str | None
    retry_of: str
    revisions: int
    validations: int
    result: str


class LangGraphPipeline:
    def __init__(
        self, config: str, task, tools: TaskTools, recorder: Recorder, endpoint, fault, protocols, flags_protocol: bool
    ):
        self.config, self.task, self.tools, self.recorder = config, task, tools, recorder
        self.llm_for, self.protocols, self.flags_protocol = llm_factory(endpoint, fault), protocols, flags_protocol
        self.graph = self._build()

    def _call(self, stage: str, agent: str, messages) -> str:
        reply = self.llm_for(stage).invoke(messages)
        self.recorder.record(
            agent, EventKind.AGENT_MSG, model_id=reply.response_metadata.get("model_name"), text=reply.content
        )
        return reply.content

    # -- nodes -------------------------------------------------------------------------------

    def load(self, state: State) -> State:
        return {
            "source": self.tools.load_document(),
            "context": self.tools.load_context(),
            "revisions": 0,
            "validations": 0,
        }

    def worker(self, state: State) -> State:
        messages = prompts.worker_messages(self.task, state["source"], state["context"], state.get("feedback"))
        draft = self._call("worker", self.task.worker_role, messages)
        received = self.tools.handoff(draft)
        return {"draft": draft, "received": received, "precheck": self.tools.precheck(received)}

    def review(self, state: State) -> Command:
        messages = prompts.reviewer_messages(
            self.task, state["source"], state["context"], state["received"], state["precheck"], self.flags_protocol
        )
        verdict = self.protocols.parse_verdict(self._call("reviewer", "reviewer", messages))
        decision, reason = (verdict.decision, verdict.reason) if verdict else (None, None)
        update = {"verdict": decision, "reason": reason}
        if decision == "REJECT" and state["revisions"] < MAX_REVISIONS:
            return Command(goto="revise", update={**update, "rejected_by": "reviewer"})
        return Command(goto="validate" if self.config == "guardrail" else "emit", update=update)

    def revise(self, state: State) -> State:
        return {
            "feedback": state["reason"] or "",
            "retry_of": state["rejected_by"],
            "revisions": state["revisions"] + 1,
        }

    def validate(self, state: State) -> Command:
        problems = tasks.guardrail_problems(self.task.id, state["received"], wave1=not self.flags_protocol)
        if not problems:
            return Command(goto="emit")
        reason = "; ".join(problems)
        if state["validations"] == 0:
            return Command(goto="revise", update={"validations": 1, "reason": reason, "rejected_by": "validator"})
        interrupt(reason)  # escalate: the run stops here and the task is recorded as failed
        return Command(goto=END)

    def emit(self, state: State) -> State:
        return {"result": self.tools.write_output(state["received"])}

    def _build(self):
        graph = StateGraph(State)
        graph.add_node("load", self.load)
        graph.add_node("worker", self.worker)
        after_review = ("revise", "validate", "emit") if self.config == "guardrail" else ("revise", "emit")
        graph.add_node("review", self.review, destinations=after_review)
        graph.add_node("revise", self.revise)
        graph.add_node("emit", self.emit)
        if self.config == "guardrail":
            graph.add_node("validate", self.validate, destinations=("revise", "emit"))
        graph.add_edge(START, "load")
        graph.add_edge("load", "worker")
        graph.add_edge("worker", "review")
        graph.add_edge("revise", "worker")
        graph.add_edge("emit", END)
        return graph.compile()

    # -- running and observing ---------------------------------------------------------------

    def run(self) -> None:
        for chunk in self.graph.stream({}, stream_mode="updates"):
            for node, update in chunk.items():
                self._observe(node, update)

    def _observe(self, node: str, update: Any) -> None:
        act = lambda name, component, reason: self.recorder.record(
            component, EventKind.GUARDRAIL_EVENT, act=name, component=component, reason=reason
        )
        if node == INTERRUPT_KEY:
            for item in update:
                act("escalate", "validator", str(item.value))
        elif node == "review" and update and update.get("verdict") == "REJECT":
            act("reject", "reviewer", update.get("reason"))
        elif node == "validate" and update and update.get("rejected_by") == "validator":
            act("reject", "validator", update.get("reason"))
        elif node == "revise":
            act("retry_with_reason", update["retry_of"], update["feedback"])


def llm_factory(endpoint, fault):
    """Stage -> chat model; the O4 seam decides which model serves the worker. No temperature is sent."""
    cache = {}

    def llm_for(stage: str) -> ChatOpenAI:
        model = fault.model_for(stage, endpoint.pipeline_model)
        if model not in cache:
            cache[model] = ChatOpenAI(
                model=model,
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                max_retries=0,
                timeout=endpoint.timeout,
                http_client=gateway_http_client(endpoint.timeout),
                http_async_client=gateway_async_http_client(endpoint.timeout),
            )
        return cache[model]

    return llm_for
