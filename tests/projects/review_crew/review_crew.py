"""A two-task crew for the CrewAI surface tests, written as a team would: a writer task with a function
guardrail and two tools (one a BaseTool subclass), a reviewer task with an LLM guardrail, a verdict
token and a publishing tool."""

from pathlib import Path

from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import BaseTool, tool


class WordCount(BaseTool):
    name: str = "word_count"
    description: str = "Count the words of a text."

    def _run(self, text: str) -> str:
        return f"{len(text.split())} words"


WORD_COUNT = WordCount()


@tool("fetch_fact")
def fetch_fact(topic: str) -> str:
    """The fact on file for a topic."""
    return "The Elbe is 1094 km long."


@tool("publish")
def publish(text: str) -> str:
    """Publish the summary."""
    Path("published.txt").write_text(text)
    return "published"


def starts_with_summary(output):
    if output.raw.startswith("SUMMARY:"):
        return True, output.raw
    return False, "the answer must start with SUMMARY:"


def build_crew():
    llm = LLM(model="crew-large", max_retries=0)
    writer = Agent(
        role="Writer",
        goal="Summarise the fact",
        backstory="You write one-line summaries.",
        tools=[fetch_fact, WORD_COUNT],
        llm=llm,
        allow_delegation=False,
    )
    reviewer = Agent(
        role="Reviewer",
        goal="Check the summary",
        backstory="You check summaries against the fact.",
        tools=[publish],
        llm=llm,
        allow_delegation=False,
    )
    write = Task(
        name="write",
        description="Summarise what is on file about {topic}.",
        expected_output="SUMMARY: <one line>",
        agent=writer,
        guardrail=starts_with_summary,
        guardrail_max_retries=1,
    )
    review = Task(
        name="review",
        description="Check the summary; publish it if it holds.",
        agent=reviewer,
        context=[write],
        expected_output="Your review, ending with VERDICT: APPROVE or VERDICT: REJECT - <reason>.",
        guardrail="The review must end with a verdict line.",
    )
    return Crew(agents=[writer, reviewer], tasks=[write, review], process=Process.sequential, verbose=False)
