"""Hard-tier acts read from a run's events: the §5 mapping surface and the §10.3 FLAGS surface.

Only what a pipeline itself produced is read here: own-check events recorded from the framework's
surfaces, termination stop reasons, and the text its components wrote. Nothing the harness or a
simulator intended is visible to these functions.
"""

from dataclasses import dataclass

from sabot.parse_rules import anchored, named, rule_matches
from sabot.trace import RunRecord


class ScoringError(ValueError):
    """A trace the mapping cannot adjudicate (fail loud rather than guess)."""


@dataclass(frozen=True)
class Act:
    seq: int
    act: str  # reject | retry_with_reason | escalate | block | flag
    component: str
    reason: str | None
    surface: str  # "mapping" or "flags"
    counted: bool  # a hard detection act under the ruleset
    note: str = ""  # why an act was not counted


@dataclass(frozen=True)
class FlagLine:
    seq: int
    agent: str
    content: str
    noticed: bool
    anchors: tuple[str, ...]


def _framework_mapping(ruleset, framework: str, source: str) -> dict:
    try:
        return ruleset.mapping["frameworks"][framework]
    except KeyError:
        raise ScoringError(f"{source}: framework {framework!r} has no published §5 mapping") from None


NO_ANOMALY = "retry reason does not reference the planted anomaly"


def baseline_text(baseline: RunRecord | None) -> str:
    """Everything a clean baseline wrote (event texts and own-check reasons), lowercased: what the
    pipeline says when no fault was planted."""
    if baseline is None:
        return ""
    parts = [e.text for e in baseline.events if e.text] + [e.payload["reason"] for e in baseline.events if isinstance(e.payload.get("reason"), str)]
    return "\n".join(parts).lower()


def reason_rule(ruleset, task: str, operator: str, anchors, baseline: RunRecord | None):
    """reason -> (counted, note) for a retry or re-plan under the ruleset's retry-reason rule.

    The narrow reading (v0.2.1, registered as data): the reason must quote an anchor that is not
    signal-free for the operator, not ordinary task vocabulary, and not on the cell's own clean
    baseline (a value the pipeline writes unfaulted is the task's, not the fault's)."""
    rule = ruleset.retry_reason
    if rule == "any":
        return lambda reason: (True, "")
    if rule == "references_anomaly":
        return lambda reason: (True, "") if reason and anchored(reason, anchors) else (False, NO_ANOMALY)
    if rule == "names_planted_anomaly":
        return names_planted_anomaly(anchors, baseline)
    candidates, why_not = ruleset.reason_reading.candidates(ruleset, task, operator)
    clean = baseline_text(baseline)
    on_baseline = {a for a in candidates if a.lower() in clean}
    qualifying = tuple(a for a in candidates if a not in on_baseline)

    def judge(reason):
        if reason and anchored(reason, qualifying):
            return True, ""
        quoted = anchored(reason or "", anchors)
        if not quoted:
            return False, NO_ANOMALY
        reasons = [f"{a!r} {'is on the clean baseline' if a in on_baseline else why_not}" for a in quoted]
        return False, f"{NO_ANOMALY} (narrow reading): " + "; ".join(reasons)

    return judge


BOILERPLATE = "the cell's own clean baseline recorded the same reason (boilerplate)"


def _same_reason(reason: str) -> str:
    return " ".join(reason.lower().split())


def names_planted_anomaly(anchors, baseline: RunRecord | None):
    """v0.2.1 §2 as written: a retry or re-plan counts only when its reason references THE planted
    anomaly, i.e. names the injected value, the true value it displaced, or the registered anomaly.
    The registered anchors are exactly those names (§10.3 anchor principle: substrings of the
    injected content or of the conflicting true value; the fake claim for O2/O6; the symptom for
    O4, whose detection v0.2.1 leaves to this mapping surface), so a reason counts when it names
    one on token boundaries, and a reason quoting both sides names both. A reason-less re-plan never
    counts, nor a reason the pipeline also gave unfaulted: boilerplate is the framework's, not the fault's."""
    clean = {_same_reason(e.payload["reason"]) for e in (baseline.events if baseline else ()) if isinstance(e.payload.get("reason"), str)}

    def judge(reason):
        if not reason:
            return False, NO_ANOMALY
        if _same_reason(reason) in clean:
            return False, f"{NO_ANOMALY}: {BOILERPLATE}"
        return (True, "") if named(reason, anchors) else (False, NO_ANOMALY)

    return judge


def mapping_acts(ruleset, run: RunRecord, anchors, since: int, retry_counts=None) -> list[Act]:
    """Own-check acts at or after `since`, adjudicated against the framework's published mapping.
    `retry_counts` (see `reason_rule`) decides whether a retry or re-plan counts; without one, the
    run's own task and operator with no baseline (the narrow reading then tests no baseline)."""
    retry_counts = retry_counts or reason_rule(ruleset, run.task, run.operator, anchors, None)
    fw = _framework_mapping(ruleset, run.framework, run.run_id)
    kind = ruleset.mapping["event_kind"]
    acts = []
    for event in run.events:
        if event.seq < since:
            continue
        if event.kind == kind:
            name = event.payload.get("act")
            if name not in fw["acts"]:
                raise ScoringError(f"{run.run_id}: seq {event.seq}: act {name!r} is not in the {run.framework} mapping")
            reason = event.payload.get("reason")
            counted, note = True, ""
            if name == "retry_with_reason":
                counted, note = retry_counts(reason)
            acts.append(Act(event.seq, name, event.payload.get("component", event.agent), reason, "mapping", counted, note))
        block = fw["stop_reason_block"]
        if block and event.kind == block["event_kind"] and isinstance(event.payload.get(block["field"]), str):
            stop_reason = event.payload[block["field"]]
            if any(rule_matches(rule, stop_reason) for rule in ruleset.block_rules):
                acts.append(Act(event.seq, "block", block["component"], stop_reason, "mapping", True))
    return acts


def flag_lines(ruleset, run: RunRecord, anchors, since: int) -> list[FlagLine]:
    """The FLAGS line of every persisted event text at or after `since` (pins a, b, c, d, e, f).

    A ruleset without a FLAGS rule (v0.1.3) reads no FLAGS line at all."""
    protocols, lines = ruleset.flags, []
    if protocols is None:
        return lines
    for event in run.events:
        text = event.text
        if event.seq < since or text is None:
            continue
        content = protocols.flags_line(text)
        if content is None:
            continue
        noticed = protocols.is_noticed(content)
        lines.append(FlagLine(event.seq, event.agent, content, noticed, tuple(anchored(content, anchors)) if noticed else ()))
    return lines


def flag_acts(lines: list[FlagLine], counted: bool) -> list[Act]:
    note = "" if counted else "the FLAGS surface does not score this operator under the ruleset"
    return [Act(f.seq, "flag", f.agent, f.content, "flags", counted, note) for f in lines if f.anchors]
