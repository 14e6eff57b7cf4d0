"""Supplier vetting: a researcher establishes the facts on a new supplier, QA signs them off and onboards it.

Crew(process=sequential):
  research    the Supplier Researcher works the commercial register, the sanctions screening, the
              credit report and the procurement policy into a vetting brief (one JSON object).
              Guardrails: the brief's format (a function) and a read of its evidence against the
              request and the policy (CrewAI's LLM guardrail); two retries, then the task fails.
  qa_review   the Vendor Risk QA checks the brief against the request and the policy, onboards the
              supplier when it holds, and ends with VERDICT: APPROVE or VERDICT: REJECT - <reason>
              (a function guardrail keeps that last line well formed).
"""

import json
import os
import re
from pathlib import Path

from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import tool

MODEL = os.environ.get("VETTING_MODEL", "vetting-large")
ONBOARDED = Path("onboarded_suppliers.jsonl")

# Staging fixtures of the register, the credit bureau and the policy store.
REGISTER = {
    "Nordwind Logistics GmbH": {
        "name": "Nordwind Logistics GmbH",
        "register": "HRB 48213 Hamburg",
        "status": "active",
        "incorporated": 2011,
    }
}
CREDIT = {"Nordwind Logistics GmbH": {"credit_score": 72, "payment_days": 31, "revenue_eur_m": 48.2}}
POLICY = (
    "Supplier policy (rev 2026-09, current): onboard a supplier only if it is active in the register, "
    "its sanctions screening shows 0 matches and its credit score is at least 60; cap the first contract at EUR 250000."
)

BRIEF_FIELDS = (
    "supplier",
    "register_status",
    "sanctions",
    "credit_score",
    "bank_reference_score",
    "policy",
    "contract_cap_eur",
    "recommendation",
)
VERDICT_LINE = re.compile(r"^VERDICT:\s*(APPROVE|REJECT\s*-\s*\S.*)$")


@tool("company_registry")
def company_registry(company: str) -> str:
    """Look a company up in the commercial register."""
    return json.dumps(REGISTER[company])


@tool("sanctions_screen")
def sanctions_screen(company: str) -> str:
    """Screen a company against the EU, UN and OFAC sanctions lists."""
    return f"screened {company!r} against the EU, UN and OFAC lists (list version 2026-11-28): 0 matches"


@tool("credit_report")
def credit_report(company: str) -> str:
    """The credit bureau's report on a company."""
    return json.dumps(CREDIT[company])


@tool("procurement_policy")
def procurement_policy(region: str) -> str:
    """The supplier policy in force for a region."""
    return POLICY


@tool("onboard_supplier")
def onboard_supplier(company: str, contract_cap_eur: int) -> str:
    """Create the supplier in the ERP with its first-contract cap."""
    with ONBOARDED.open("a") as log:
        log.write(json.dumps({"company": company, "contract_cap_eur": contract_cap_eur}) + "\n")
    return f"supplier onboarded: {company} (first contract capped at EUR {contract_cap_eur})"


def brief_is_well_formed(output):
    """The brief's format: one JSON object carrying every field."""
    try:
        brief = json.loads(output.raw)
    except ValueError:
        return False, "the brief must be one JSON object, with no text around it"
    missing = [f for f in BRIEF_FIELDS if f not in brief]
    return (False, f"the brief lacks {', '.join(missing)}") if missing else (True, output.raw)


EVIDENCE_CHECK = (
    "The brief's credit score must agree with the bank reference the request quotes, the sanctions "
    "result must name the lists and the list version it was screened against, and the recommendation "
    f"and the contract cap must follow the current supplier policy: {POLICY}"
)


def ends_with_verdict(output):
    """The review's format: its last line is the verdict."""
    lines = output.raw.strip().splitlines()
    if lines and VERDICT_LINE.match(lines[-1].strip()):
        return True, output.raw
    return False, "the last line must be 'VERDICT: APPROVE' or 'VERDICT: REJECT - <reason>'"


def build_crew():
    llm = LLM(model=MODEL, temperature=0.2, max_retries=1)
    researcher = Agent(
        role="Supplier Researcher",
        goal="Establish the facts about a new supplier from the records",
        backstory="You work in procurement and vet every new supplier from the register, the sanctions lists and the credit bureau.",
        tools=[company_registry, sanctions_screen, credit_report, procurement_policy],
        llm=llm,
        allow_delegation=False,
    )
    qa = Agent(
        role="Vendor Risk QA",
        goal="Sign off a supplier only when its vetting brief holds",
        backstory=f"You check vetting briefs before a supplier reaches the ERP. The policy in force: {POLICY}",
        tools=[onboard_supplier],
        llm=llm,
        allow_delegation=False,
    )
    research = Task(
        name="research",
        agent=researcher,
        guardrails=[brief_is_well_formed, EVIDENCE_CHECK],
        guardrail_max_retries=2,
        description=(
            "Vet the supplier {supplier} for this request: {request}\n"
            "Use your tools to read its register entry, its sanctions screening, its credit report and the EU supplier policy."
        ),
        expected_output=(
            f"One JSON object with the fields {', '.join(BRIEF_FIELDS)}: the figures as the tools gave them, "
            "the bank reference score as the request quotes it, and the recommendation 'onboard' or 'decline'."
        ),
    )
    review = Task(
        name="qa_review",
        agent=qa,
        context=[research],
        guardrail=ends_with_verdict,
        description=(
            "Check the vetting brief for {supplier} against the request ({request}) and the policy in force. "
            "If it holds, onboard the supplier with onboard_supplier, with the brief's contract cap."
        ),
        expected_output="Your review, ending with exactly one line: VERDICT: APPROVE or VERDICT: REJECT - <reason>.",
    )
    return Crew(agents=[researcher, qa], tasks=[research, review], process=Process.sequential, verbose=False)
