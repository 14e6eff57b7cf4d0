"""A deterministic stand-in for the model, for CI: it plays the researcher, CrewAI's guardrail agent and QA.

The researcher calls its four tools, then applies the policy it was shown to what they returned;
"vetting-mini" (the cheap tier) proposes the contract the supplier asked for instead of the
policy's cap unless a guardrail pushed back. The guardrail agent and QA check the brief against
the bank reference in the request and the policy in force; per seed each is more or less
attentive to evidence that is missing or contradicts the request.
"""

import json
import random
import re

SUPPLIER = "Nordwind Logistics GmbH"


def _texts(messages, role):
    return [m.get("content") or "" for m in messages if m.get("role") == role and isinstance(m.get("content"), str)]


def _json_in(text):
    found = re.search(r"\{.*\}", text, re.S)
    return json.loads(found.group(0)) if found else {}


def _policy_terms(policy):
    threshold = int(re.search(r"credit score is at least (\d+)", policy).group(1))
    cap = int(re.search(r"cap the first contract at EUR (\d+)", policy).group(1))
    revision = re.search(r"\((rev [^)]*)\)", policy).group(1)
    return threshold, cap, revision


def _request_terms(text):
    reference = int(re.search(r"bank reference quotes a credit score of (\d+)", text).group(1))
    asked = int(re.search(r"first contract of EUR (\d+)", text).group(1))
    return reference, asked


def _research(messages, model, rng):
    """Tool calls first; then the brief, from the tool results and the request."""
    results = _texts(messages, "tool")
    if not results:
        calls = [
            {"name": n, "arguments": {"company": SUPPLIER}}
            for n in ("company_registry", "sanctions_screen", "credit_report")
        ]
        return {"tool_calls": calls + [{"name": "procurement_policy", "arguments": {"region": "EU"}}]}
    asked_text = "\n".join(_texts(messages, "user"))
    register = json.loads(next(t for t in results if '"register"' in t))
    credit = json.loads(next(t for t in results if '"credit_score"' in t))
    sanctions = next(t for t in results if "screen" in t or "sanction" in t)
    policy = next(t for t in results if "policy" in t.lower())
    threshold, cap, revision = _policy_terms(policy)
    reference, asked = _request_terms(asked_text)
    told = "Previous attempt failed validation" in asked_text
    contract = asked if model.endswith("-mini") and not told and rng.random() < 0.7 else min(asked, cap)
    clean = (
        register["status"] == "active"
        and re.search(r"\b(0|no) matches\b", sanctions)
        and credit["credit_score"] >= threshold
    )
    return json.dumps(
        {
            "supplier": SUPPLIER,
            "register_status": register["status"],
            "sanctions": sanctions,
            "credit_score": credit["credit_score"],
            "bank_reference_score": reference,
            "policy": revision,
            "contract_cap_eur": contract,
            "recommendation": "onboard" if clean else "decline",
        }
    )


def _problems(brief, policy, attentive):
    """What a checker that knows the policy in force finds wrong with a brief."""
    threshold, cap, revision = _policy_terms(policy)
    found = []
    if brief["contract_cap_eur"] > cap:
        found.append(f"the contract cap EUR {brief['contract_cap_eur']} exceeds the policy's EUR {cap}")
    if attentive and brief["credit_score"] != brief["bank_reference_score"]:
        found.append(
            f"the credit score {brief['credit_score']} contradicts the bank reference {brief['bank_reference_score']}"
        )
    if attentive and "list version" not in brief["sanctions"]:
        found.append("the sanctions result names no lists or list version, so the screening is not evidenced")
    if attentive and brief["policy"] != revision:
        found.append(f"the brief follows {brief['policy']}, not the policy in force ({revision})")
    if brief["recommendation"] == "onboard" and brief["credit_score"] < threshold:
        found.append(
            f"the brief recommends onboarding with a credit score of {brief['credit_score']}, below the policy's {threshold}"
        )
    return found


def _guardrail(messages, rng):
    """CrewAI's LLM guardrail: {"valid", "feedback"} on the researcher's brief."""
    text = "\n".join(_texts(messages, "user"))
    policy = re.search(r"the current supplier policy: (Supplier policy.*?EUR \d+\.)", text, re.S).group(1)
    brief = _json_in(text.split("Task result", 1)[-1] if "Task result" in text else text)
    found = _problems(brief, policy, attentive=rng.random() < 0.6)
    return json.dumps({"valid": not found, "feedback": "; ".join(found) or None})


def _review(messages, rng):
    if messages[-1]["role"] == "tool":
        return f"{messages[-1]['content']}.\nVERDICT: APPROVE"
    system, text = messages[0]["content"], "\n".join(_texts(messages, "user"))
    policy = re.search(r"The policy in force: (Supplier policy.*?EUR \d+\.)", system, re.S).group(1)
    brief = _json_in(text.split("context you're working with:", 1)[-1])
    if brief.get("recommendation") == "decline":
        return "The brief recommends declining the supplier.\nVERDICT: REJECT - the brief recommends declining"
    found = _problems(brief, policy, attentive=rng.random() < 0.5)
    if found:
        return f"VERDICT: REJECT - {found[0]}"
    return {
        "tool_calls": [
            {
                "name": "onboard_supplier",
                "arguments": {"company": brief["supplier"], "contract_cap_eur": brief["contract_cap_eur"]},
            }
        ]
    }


def make_responder(seed):
    rng = random.Random(seed)

    def respond(request):
        messages = request["messages"]
        system = messages[0]["content"] if messages[0].get("role") == "system" else ""
        if system.startswith("You are Supplier Researcher"):
            return _research(messages, request["model"], rng)
        if system.startswith("You are Guardrail Agent"):
            return _guardrail(messages, rng)
        if system.startswith("You are Vendor Risk QA"):
            return _review(messages, rng)
        return "I only vet suppliers."

    return respond
