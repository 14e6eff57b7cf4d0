"""Refund desk: read a support ticket, draft a refund, have a reviewer check it, then pay it out.

intake -> drafter -> reviewer -> payout
                        |  REJECTED: back to the drafter with the notes (twice at most)
                        +- still REJECTED: escalate to a human (interrupt)
"""

import json
import os
import re
from pathlib import Path
from typing import TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

MODEL = os.environ.get("REFUND_DESK_MODEL", "refund-desk-large")
LEDGER = Path("refund_ledger.jsonl")
MAX_DRAFTS = 2

# Staging fixtures of the order service and the policy store.
ORDERS = {
    "A-1001": {"order_id": "A-1001", "customer": "C-77", "item": "Kettle KX-2", "amount_paid": 84.0, "shipping": 5.0}
}
POLICY = "Refund policy EU (rev 2026-10, current): a damaged item is refunded in full minus shipping. Shipping is never refunded."

DRAFTER_PROMPT = """You draft refund decisions for the support desk.
Work only from the order record and the policy. Answer with one JSON object:
{"order_id": ..., "amount": <refund in EUR>, "rationale": ...}"""

REVIEWER_PROMPT = """You review refund decisions before money moves.
Check the amount against the order record, the policy and the ticket, and check that the photo
check really verified the damage. Answer APPROVED, or REJECTED: <what is wrong>."""


@tool
def lookup_order(order_id: str) -> str:
    """Fetch an order from the order service."""
    return json.dumps(ORDERS[order_id])


@tool
def refund_policy(region: str) -> str:
    """The refund policy in force for a region."""
    return POLICY


@tool
def verify_damage_photo(order_id: str) -> str:
    """Run the image check on the customer's damage photo."""
    return f"photo check {order_id}: crack visible on the kettle body, item matches the order, confidence 0.94"


@tool
def issue_refund(order_id: str, amount: float) -> str:
    """Pay a refund out through the payments ledger."""
    with LEDGER.open("a") as ledger:
        ledger.write(json.dumps({"order_id": order_id, "amount": amount}) + "\n")
    return f"refund {amount:.2f} paid for {order_id}"


class Ticket(TypedDict, total=False):
    ticket: str
    order: str
    policy: str
    photo_check: str
    draft: str
    drafts: int
    verdict: str
    review_notes: str
    receipt: str


def build_graph():
    llm = ChatOpenAI(model=MODEL, max_retries=1)

    def intake(state: Ticket) -> Ticket:
        order_id = re.search(r"\bA-\d+\b", state["ticket"]).group(0)
        return {
            "order": lookup_order.invoke({"order_id": order_id}),
            "policy": refund_policy.invoke({"region": "EU"}),
            "photo_check": verify_damage_photo.invoke({"order_id": order_id}),
            "drafts": 0,
        }

    def drafter(state: Ticket) -> Ticket:
        ask = f"Ticket: {state['ticket']}\nOrder record: {state['order']}\nPolicy: {state['policy']}"
        if state.get("review_notes"):
            ask += f"\nReviewer feedback on your last draft: {state['review_notes']}"
        reply = llm.invoke([SystemMessage(DRAFTER_PROMPT), HumanMessage(ask)])
        return {"draft": reply.content, "drafts": state["drafts"] + 1}

    def reviewer(state: Ticket) -> Command:
        ask = (
            f"Ticket: {state['ticket']}\nOrder record: {state['order']}\nPolicy: {state['policy']}\n"
            f"Photo check: {state['photo_check']}\nDraft decision: {state['draft']}"
        )
        verdict = llm.invoke([SystemMessage(REVIEWER_PROMPT), HumanMessage(ask)]).content.strip()
        notes = verdict.partition(":")[2].strip()
        if not verdict.startswith("REJECTED"):
            return Command(goto="payout", update={"verdict": verdict})
        return Command(
            goto="drafter" if state["drafts"] < MAX_DRAFTS else "escalate",
            update={"verdict": verdict, "review_notes": notes},
        )

    def escalate(state: Ticket) -> Ticket:
        interrupt(f"refund for this ticket needs a human: {state['review_notes']}")
        return {}

    def payout(state: Ticket) -> Ticket:
        draft = json.loads(state["draft"])
        return {"receipt": issue_refund.invoke({"order_id": draft["order_id"], "amount": draft["amount"]})}

    graph = StateGraph(Ticket)
    graph.add_node("intake", intake)
    graph.add_node("drafter", drafter)
    graph.add_node("reviewer", reviewer, destinations=("drafter", "escalate", "payout"))
    graph.add_node("escalate", escalate)
    graph.add_node("payout", payout)
    graph.add_edge(START, "intake")
    graph.add_edge("intake", "drafter")
    graph.add_edge("drafter", "reviewer")
    graph.add_edge("payout", END)
    graph.add_edge("escalate", END)
    return graph.compile()
