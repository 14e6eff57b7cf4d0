"""An expense audit run by Agent Framework's Magentic orchestration, as its team wrote it: a manager
plans and tracks progress in its ledgers, an accountant totals the report with its tools."""

import json
from pathlib import Path

from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework.orchestrations import MagenticBuilder


@tool
def load_expenses() -> str:
    """Load the expense report: one 'item: amount' line each."""
    return "taxi: 42\nhotel: 310\ndinner: 68"


@tool
def save_total(total: str) -> str:
    """Save the audited total of the report."""
    Path("total.json").write_text(json.dumps({"total": total}))
    return "saved"


def build_workflow():
    def client():
        return OpenAIChatCompletionClient(
            model="audit-large"
        )  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment

    accountant = Agent(
        client=client(),
        name="accountant",
        description="Totals the expense report and saves the total.",
        tools=[load_expenses, save_total],
        instructions="You are the accountant. Load the expense report, total it, save the total, then reply with every line and 'TOTAL: <total>'.",
    )
    manager = Agent(client=client(), name="manager", instructions="You are the audit manager.")
    return MagenticBuilder(
        participants=[accountant], manager_agent=manager, max_stall_count=1, max_round_count=4
    ).build()
