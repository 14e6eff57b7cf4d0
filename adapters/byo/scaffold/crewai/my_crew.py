"""A minimal worker -> reviewer CrewAI crew; replace with your own factory (no edit to it is needed)."""

import json
from pathlib import Path

from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import tool


@tool("calculator")
def calculator(expression: str) -> str:
    """Evaluate a sum of two integers."""
    a, b = (int(x) for x in expression.split("+"))
    return str(a + b)


@tool("check_answer")
def check_answer(answer: str) -> str:
    """Check that the answer is a number."""
    return f"check: {answer!r} is a number" if answer.strip().isdigit() else f"check: {answer!r} is not a number"


@tool("save_answer")
def save_answer(answer: str) -> str:
    """Save the answer."""
    Path("answer.json").write_text(json.dumps({"answer": answer}))
    return "saved"


def answer_is_a_number(output):
    """The answer task's format: a bare integer (a CrewAI function guardrail)."""
    text = output.raw.strip()
    return (True, text) if text.isdigit() else (False, f"the answer must be a bare integer, not {text!r}")


def build_crew():
    llm = LLM(model="my-model", max_retries=1)
    worker = Agent(
        role="Worker",
        goal="Answer the question",
        backstory="You answer sums with the calculator.",
        tools=[calculator],
        llm=llm,
        allow_delegation=False,
    )
    reviewer = Agent(
        role="Reviewer",
        goal="Check the answer and save it when it is right",
        backstory="You check answers before they are saved.",
        tools=[check_answer, save_answer],
        llm=llm,
        allow_delegation=False,
    )
    answer = Task(
        name="answer",
        description="{question}",
        expected_output="The answer: a bare integer.",
        agent=worker,
        guardrail=answer_is_a_number,
        guardrail_max_retries=1,
    )
    review = Task(
        name="review",
        description="Check the answer to: {question} If it is right, save it with save_answer.",
        expected_output="Your review, ending with VERDICT: APPROVE or VERDICT: REJECT - <reason>.",
        agent=reviewer,
        context=[answer],
    )
    return Crew(agents=[worker, reviewer], tasks=[answer, review], process=Process.sequential, verbose=False)
