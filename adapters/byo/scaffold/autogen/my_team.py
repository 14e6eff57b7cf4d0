"""A minimal worker -> reviewer AutoGen team; replace with your own factory (no edit to it is needed)."""

import json
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": True,
    "structured_output": False,
    "family": "unknown",
}


def calculator(expression: str) -> str:
    """Evaluate a sum of two integers."""
    a, b = (int(x) for x in expression.split("+"))
    return str(a + b)


def check_answer(answer: str) -> str:
    """Check that the answer is a number."""
    return f"check: {answer!r} is a number" if answer.strip().isdigit() else f"check: {answer!r} is not a number"


def save_answer(answer: str) -> str:
    """Save the answer."""
    Path("answer.json").write_text(json.dumps({"answer": answer}))
    return "saved"


def build_team():
    def client():
        return OpenAIChatCompletionClient(model="my-model", model_info=MODEL_INFO, max_retries=1)

    worker = AssistantAgent(
        "worker",
        model_client=client(),
        system_message="You are the worker. Answer the sum with the calculator.",
        tools=[calculator],
        reflect_on_tool_use=True,
    )
    reviewer = AssistantAgent(
        "reviewer",
        model_client=client(),
        tools=[check_answer, save_answer],
        reflect_on_tool_use=True,
        max_tool_iterations=2,
        system_message="You are the reviewer. Check the worker's answer; save it and say APPROVE if it is right, else say REJECT: <why>.",
    )
    done = TextMentionTermination("APPROVE", sources=["reviewer"]) | MaxMessageTermination(6)
    return RoundRobinGroupChat([worker, reviewer], termination_condition=done)
