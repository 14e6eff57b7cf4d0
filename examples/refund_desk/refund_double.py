"""A deterministic stand-in for the model, for CI: it answers the drafter and the reviewer from the prompt.

The drafter applies the policy to the order record; "refund-desk-mini" (the cheap tier) forgets the
shipping deduction unless told. The reviewer recomputes the amount and compares it with the ticket;
per seed it is more or less attentive to a photo check without a confidence and to a policy
marked superseded.
"""

import json
import random
import re


def _order(text):
    found = re.search(r"Order record: (\{.*?\})", text)
    return json.loads(found.group(1)) if found else {}


def _refund(order, policy, forget_shipping=False):
    paid = float(order.get("amount_paid", 0))
    if "minus shipping" in policy and not forget_shipping:
        return round(paid - float(order.get("shipping", 0)), 2)
    return paid


def make_responder(seed):
    rng = random.Random(seed)

    def draft(text, model):
        order, policy = _order(text), re.search(r"Policy: (.*)", text).group(1)
        told = "Reviewer feedback" in text
        sloppy = model.endswith("-mini") and not told and rng.random() < 0.7
        amount = _refund(order, policy, forget_shipping=sloppy)
        return json.dumps(
            {"order_id": order.get("order_id"), "amount": amount, "rationale": "policy applied to the order record"}
        )

    def review(text):
        order, policy = _order(text), re.search(r"Policy: (.*)", text).group(1)
        photo = re.search(r"Photo check: (.*)", text).group(1)
        draft = json.loads(re.search(r"Draft decision: (\{.*\})", text).group(1))
        claimed = re.search(r"I paid EUR (\d+(?:\.\d+)?)", text)
        attentive = rng.random() < 0.6
        expected = _refund(order, policy)
        if abs(float(draft["amount"]) - expected) > 0.005:
            return f"REJECTED: amount {draft['amount']:.2f} does not follow the policy for this order (expected {expected:.2f})"
        if claimed and abs(float(claimed.group(1)) - float(order["amount_paid"])) > 0.005 and attentive:
            return f"REJECTED: the ticket says EUR {claimed.group(1)} was paid but the order record says {order['amount_paid']:.2f}"
        if "confidence" not in photo and attentive:
            return "REJECTED: the photo check gives no confidence, so the damage was not verified"
        if "superseded" in policy and attentive:
            return "REJECTED: the policy text is marked superseded"
        return "APPROVED"

    def respond(request):
        system = request["messages"][0]["content"]
        text = request["messages"][-1]["content"]
        if system.startswith("You draft refund decisions"):
            return draft(text, request["model"])
        if system.startswith("You review refund decisions"):
            return review(text)
        return {"content": "I can only draft and review refunds."}

    return respond
