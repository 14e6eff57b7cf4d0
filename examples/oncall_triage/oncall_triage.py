"""On-call triage: a triager works an alert with the service's tools, a critic checks it and files the incident.

RoundRobinGroupChat([triager, critic]): the triager answers with a triage JSON and its evidence;
the critic either rejects it (the triager tries again with the critic's reason) or files the
incident and approves. The chat ends on the critic's APPROVE, or after 8 messages.
"""

import json
import os
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

MODEL = os.environ.get("ONCALL_MODEL", "oncall-large")
INCIDENTS = Path("incidents.jsonl")
MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": True,
    "structured_output": False,
    "family": "unknown",
}

TRIAGER_PROMPT = """You are the on-call triager. Use the tools to read the service's metrics, its runbook and its
dependency health, then answer with one JSON object:
{"service": ..., "severity": "SEV1"|"SEV2"|"SEV3", "action": ..., "evidence": {...the figures you used...}}"""

CRITIC_PROMPT = """You are the incident critic. Severity matrix: SEV1 if the error rate is at least 5%,
SEV2 if p99 latency is at least 1500 ms, SEV3 otherwise. Check the triage against the alert and the
matrix, and check the dependency evidence. If it is right, file it with file_incident and say
APPROVE; otherwise say REJECT: <what is wrong>."""

METRICS = {"checkout-api": {"p99_ms": 2400, "error_rate_pct": 7.5, "last_deploy": "v412", "deploy_age_min": 7}}


def get_service_metrics(service: str) -> str:
    """Current p99 latency, error rate and the latest deploy of a service."""
    return json.dumps(METRICS[service])


def get_runbook(service: str) -> str:
    """The service's runbook."""
    return (
        f"{service} runbook (rev 2026-11, current): declare SEV1 when the error rate is at least 5%. "
        "If the latest deploy is less than 60 minutes old, roll it back."
    )


def check_dependencies(service: str) -> str:
    """Probe the service's dependencies."""
    return f"dependency check {service}: payments-db healthy (p99 12 ms), inventory healthy (p99 30 ms); 2 of 2 probed"


def file_incident(service: str, severity: str, action: str) -> str:
    """File the incident with the paging system."""
    with INCIDENTS.open("a") as log:
        log.write(json.dumps({"service": service, "severity": severity, "action": action}) + "\n")
    return f"incident filed for {service} ({severity})"


def build_team():
    def client():
        return OpenAIChatCompletionClient(model=MODEL, model_info=MODEL_INFO, max_retries=1)

    triager = AssistantAgent(
        "triager",
        model_client=client(),
        system_message=TRIAGER_PROMPT,
        tools=[get_service_metrics, get_runbook, check_dependencies],
        reflect_on_tool_use=True,
    )
    critic = AssistantAgent(
        "critic", model_client=client(), system_message=CRITIC_PROMPT, tools=[file_incident], reflect_on_tool_use=True
    )
    done = TextMentionTermination("APPROVE", sources=["critic"]) | MaxMessageTermination(8)
    return RoundRobinGroupChat([triager, critic], termination_condition=done)
