"""A deterministic stand-in for the model, for CI: it plays the triager and the critic from what it is shown.

The triager asks for its three tools, then applies the runbook to the metrics; "oncall-mini" (the
cheap tier) grades by latency alone unless a critic has pushed back. The critic checks the triage
against the alert text and the severity matrix; per seed it is more or less attentive to a
dependency check that gives no figures.
"""

import json
import random
import re


def _texts(messages, role):
    return [m.get("content") or "" for m in messages if m.get("role") == role and isinstance(m.get("content"), str)]


def _triage(messages, model, rng):
    tool_results = _texts(messages, "tool")
    metrics = json.loads(next(t for t in tool_results if t.startswith("{")))
    runbook = next(t for t in tool_results if "runbook" in t)
    pushed_back = any("REJECT" in t for t in _texts(messages, "user"))
    threshold = float(re.search(r"error rate is at least (\d+(?:\.\d+)?)%", runbook).group(1))
    by_latency_only = model.endswith("-mini") and not pushed_back and rng.random() < 0.7
    if metrics["error_rate_pct"] >= threshold and not by_latency_only:
        severity = "SEV1"
    else:
        severity = "SEV2" if metrics["p99_ms"] >= 1500 else "SEV3"
    action = (
        f"roll back {metrics['last_deploy']}"
        if "roll it back" in runbook and metrics["deploy_age_min"] < 60
        else "investigate"
    )
    deps = next((t for t in tool_results if t.startswith("dependency check") or "dependenc" in t), "")
    return json.dumps(
        {
            "service": "checkout-api",
            "severity": severity,
            "action": action,
            "evidence": {
                "error_rate_pct": metrics["error_rate_pct"],
                "p99_ms": metrics["p99_ms"],
                "dependencies": deps,
            },
        }
    )


def _review(messages, rng):
    alert = next(t for t in _texts(messages, "user") if t.startswith("ALERT"))
    triage = json.loads(
        re.search(r"\{.*\}", [t for t in _texts(messages, "user") if '"severity"' in t][-1], re.S).group(0)
    )
    attentive = rng.random() < 0.6
    alert_rate = float(re.search(r"error rate (\d+(?:\.\d+)?)%", alert).group(1))
    expected = "SEV1" if alert_rate >= 5 else "SEV2"
    if abs(triage["evidence"]["error_rate_pct"] - alert_rate) > 1e-9 and attentive:
        return f"REJECT: the alert says error rate {alert_rate}% but the triage evidence says {triage['evidence']['error_rate_pct']}%"
    if triage["severity"] != expected:
        return f"REJECT: severity {triage['severity']} does not follow the matrix for an error rate of {alert_rate}% ({expected})"
    if "probed" not in triage["evidence"]["dependencies"] and attentive:
        return "REJECT: the dependency check reports no probe figures, so the dependencies were not verified"
    return {
        "tool_calls": [
            {"name": "file_incident", "arguments": {k: triage[k] for k in ("service", "severity", "action")}}
        ]
    }


def make_responder(seed):
    rng = random.Random(seed)

    def respond(request):
        messages = request["messages"]
        system = messages[0]["content"]
        if system.startswith("You are the on-call triager"):
            if messages[-1]["role"] == "tool":
                return _triage(messages, request["model"], rng)
            calls = [
                {"name": n, "arguments": {"service": "checkout-api"}}
                for n in ("get_service_metrics", "get_runbook", "check_dependencies")
            ]
            return {"tool_calls": calls}
        if system.startswith("You are the incident critic"):
            if messages[-1]["role"] == "tool":
                return "APPROVE: " + messages[-1]["content"]
            return _review(messages, rng)
        return "I only triage alerts."

    return respond
