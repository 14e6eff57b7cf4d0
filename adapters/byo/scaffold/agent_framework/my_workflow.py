"""A minimal worker -> reviewer Agent Framework workflow; replace with your own factory (no edit to it is needed).

Any built Workflow is scored as it is: a SequentialBuilder like this one, a GroupChatBuilder, or a
MagenticBuilder (whose orchestrator events a mapping can name, see sabot/mapping.json)."""

import json
from pathlib import Path

from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework.orchestrations import SequentialBuilder


@tool
def calculator(expression: str) -> str:
    """Evaluate a sum of two integers."""
    a, b = (int(x) for x in expression.split("+"))
    return str(a + b)


@tool
def check_answer(answer: str) -> str:
    """Check that the answer is a number."""
    return f"check: {answer!r} is a number" if answer.strip().isdigit() else f"check: {answer!r} is not a number"


@tool
def save_answer(answer: str) -> str:
    """Save the answer."""
    Path("answer.json").write_text(json.dumps({"answer": answer}))
    return "saved"


def build_workflow():
    def client():
        return OpenAIChatCompletionClient(model="my-model")  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment

    worker = Agent(
        client=client(),
        name="worker",
        instructions="You are the worker. Answer the sum with the calculator.",
        tools=[calculator],
    )
    reviewer = Agent(
        client=client(),
        name="reviewer",
        tools=[check_answer, save_answer],
        instructions="You are the reviewer. Check the worker's answer; save it and say APPROVE if it is right, else say REJECT: <why>.",
    )
    return SequentialBuilder(participants=[worker, reviewer]).build()
