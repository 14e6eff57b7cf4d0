"""A minimal worker -> reviewer LangGraph graph; replace with your own factory (no edit to it is needed)."""

import json
from pathlib import Path
from typing import TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command


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


class State(TypedDict, total=False):
    question: str
    hint: str
    answer: str
    verdict: str
    notes: str


def build_graph():
    llm = ChatOpenAI(model="my-model", max_retries=1)

    def worker(state):
        hint = calculator.invoke({"expression": state["question"].removeprefix("What is ").rstrip("?")})
        reply = llm.invoke(
            [
                SystemMessage("You are the worker."),
                HumanMessage(f"{state['question']} (calculator: {hint}) {state.get('notes', '')}"),
            ]
        )
        return {"answer": reply.content, "hint": check_answer.invoke({"answer": reply.content})}

    def reviewer(state):
        verdict = llm.invoke(
            [
                SystemMessage("You are the reviewer."),
                HumanMessage(f"Question: {state['question']}\nAnswer: {state['answer']}\n{state['hint']}"),
            ]
        ).content
        if verdict.startswith("REJECT") and not state.get("notes"):
            return Command(goto="worker", update={"verdict": verdict, "notes": verdict})
        return Command(goto="save", update={"verdict": verdict})

    graph = StateGraph(State)
    graph.add_node("worker", worker)
    graph.add_node("reviewer", reviewer, destinations=("worker", "save"))
    graph.add_node(
        "save", lambda state: {"answer": save_answer.invoke({"answer": state["answer"]}) and state["answer"]}
    )
    graph.add_edge(START, "worker")
    graph.add_edge("worker", "reviewer")
    graph.add_edge("save", END)
    return graph.compile()
