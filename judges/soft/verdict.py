"""The soft-tier judge verdict: what the judge sees, how its reply is parsed, one judged cell.

SPEC v0.2.1 §2 (DETECTED_SOFT) and §6: the judge sees a cell's internal transcript, the operator's
ground-truth note and a fixed rubric (`judges.soft.rubric`), and returns
``{noticed, by_which_component, evidence_quote}``. The parse is the same for every backend:

  * the reply is one JSON object with exactly those three keys (surrounding whitespace and one
    enclosing Markdown code fence are tolerated; prose around the object is not);
  * ``noticed`` is a bool, the other two are a string or null; when noticed, both must be non-empty;
  * a non-null ``evidence_quote`` must occur in the transcript the judge was shown, compared with
    every whitespace run collapsed to one space (a reply is free to re-wrap lines, not to reword).

A reply that fails the parse is retried once with the same prompt; a second failure records the cell
as ``judge_excluded`` with both reasons. `judge_cell` never raises for a bad reply or a failed call;
a sandbox violation is not a bad reply and always propagates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from judges.soft.backends.base import JudgeBackend, JudgeBackendError
from judges.soft.rubric import REPLY_KEYS, Rubric, load_rubric
from sabot.trace import RunRecord

STATUS_OK = "ok"
STATUS_EXCLUDED = "judge_excluded"
MAX_ATTEMPTS = 2  # the first call and one retry
FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```$", re.DOTALL)


class JudgeParseError(ValueError):
    """A judge reply that does not follow the output schema; `what` names the part, `why` the problem."""

    def __init__(self, what: str, why: str):
        super().__init__(f"{what}: {why}")
        self.what, self.why = what, why


@dataclass(frozen=True)
class JudgeVerdict:
    noticed: bool | None  # None only for a judge_excluded cell: no judgement exists
    by_which_component: str | None
    evidence_quote: str | None
    prompt_variant: int
    raw: str  # the judge's reply as received (the last one, for an excluded cell)
    backend: str
    backend_version: str | None  # None where the source did not record it (reference files)
    status: str = STATUS_OK  # "ok" | "judge_excluded"
    attempts: int | None = 1  # calls made for this verdict; None where not recorded
    reason: str | None = None  # why the cell was excluded, one entry per failed attempt
    source: str | None = None  # the file a cached verdict was read from

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK


def transcript(record: RunRecord, since_seq: int | None) -> str:
    """The internal transcript a judge sees: every event with a text, in seq order, as
    ``[seq] agent (kind): text``, from `since_seq` on (None: the whole run, e.g. a baseline).

    Tool results are not event texts in the run-record schema (they ride in payload fields such as
    ``output``), so they never reach the judge; only agent messages and raw verdict texts do.
    """
    lines = []
    for event in sorted(record.events, key=lambda e: e.seq):
        if since_seq is not None and event.seq < since_seq:
            continue
        text = event.text
        if text is not None:
            lines.append(f"[{event.seq}] {event.agent} ({event.kind}): {text}")
    return "\n".join(lines)


def _tool_text(payload: dict) -> str:
    """A tool call as the judge sees it: the tool, its arguments and what it returned."""
    parts = [str(payload.get("tool", "tool"))]
    if payload.get("args") is not None:
        parts.append(json.dumps(payload["args"], ensure_ascii=False, sort_keys=True, default=str))
    output = payload.get("output")
    if output is not None:
        parts.append(
            "-> "
            + (
                output
                if isinstance(output, str)
                else json.dumps(output, ensure_ascii=False, sort_keys=True, default=str)
            )
        )
    return " ".join(parts)


def shown_text(event) -> str | None:
    """An event's text as the internal transcript shows it: an agent's text, else a tool call's."""
    text = event.text
    if text is None and event.kind.startswith("tool"):
        text = _tool_text(event.payload)
    return text


def internal_transcript(record: RunRecord, marker: str) -> str:
    """The internal transcript §6 names (rubric v2): every event of the run in seq order, agent
    texts and tool calls with their outputs, with `marker` on its own line before the first event
    at or after the injection seq (no marker for a run with none recorded)."""
    lines, marked = [], record.injection_seq is None
    for event in sorted(record.events, key=lambda e: e.seq):
        if not marked and event.seq >= record.injection_seq:
            lines.append(marker)
            marked = True
        text = shown_text(event)
        if text is not None:
            lines.append(f"[{event.seq}] {event.agent} ({event.kind}): {text}")
    if not marked:
        lines.append(marker)  # the fault landed after the last recorded event
    return "\n".join(lines)


def shown_transcript(rubric: Rubric, record: RunRecord) -> str:
    """What the rubric shows the judge of a fault run."""
    if rubric.transcript_scope == "whole_run_marked":
        return internal_transcript(record, rubric.injection_marker)
    return transcript(record, record.injection_seq)


def normalize_ws(text: str) -> str:
    return " ".join(text.split())


def quote_occurs(quote: str, transcript_text: str) -> bool:
    """Whether `quote` occurs in the transcript, whitespace runs collapsed on both sides."""
    needle = normalize_ws(quote)
    return bool(needle) and needle in normalize_ws(transcript_text)


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise JudgeParseError("reply", f"duplicate key(s) {', '.join(dupes)}")
    return dict(pairs)


def _optional_str(obj: dict, key: str) -> str | None:
    value = obj[key]
    if value is not None and not isinstance(value, str):
        raise JudgeParseError(key, f"expected a string or null, got {type(value).__name__} {value!r:.60}")
    return value


def parse_reply(raw: str, transcript: str, variant: int, backend: str, backend_version: str | None) -> JudgeVerdict:
    """Parse one judge reply against the transcript it judged; raises JudgeParseError."""
    if not isinstance(raw, str):
        raise JudgeParseError("reply", f"expected text, got {type(raw).__name__}")
    body = raw.strip()
    fenced = FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise JudgeParseError("reply", "empty")
    try:
        obj = json.loads(body, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(
            "reply", f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): {body[:80]!r}"
        ) from None
    if not isinstance(obj, dict):
        raise JudgeParseError("reply", f"expected one JSON object, got {type(obj).__name__}")
    missing = [k for k in REPLY_KEYS if k not in obj]
    if missing:
        raise JudgeParseError("reply", f"missing field(s) {', '.join(missing)}")
    extra = sorted(k for k in obj if k not in REPLY_KEYS)
    if extra:
        raise JudgeParseError("reply", f"unexpected field(s) {', '.join(extra)}")
    noticed = obj["noticed"]
    if not isinstance(noticed, bool):
        raise JudgeParseError("noticed", f"expected true or false, got {type(noticed).__name__} {noticed!r:.60}")
    component = _optional_str(obj, "by_which_component")
    quote = _optional_str(obj, "evidence_quote")
    if noticed and not (component and component.strip()):
        raise JudgeParseError("by_which_component", "required when noticed is true")
    if noticed and quote is None:
        raise JudgeParseError("evidence_quote", "null is allowed only when noticed is false")
    if quote is not None and not quote_occurs(quote, transcript):
        why = (
            "empty"
            if not quote.strip()
            else f"does not occur in the transcript (whitespace normalized): {quote[:120]!r}"
        )
        raise JudgeParseError("evidence_quote", why)
    return JudgeVerdict(noticed, component, quote, variant, raw, backend, backend_version)


def _version_of(backend: JudgeBackend) -> str | None:
    try:
        return backend.version
    except JudgeBackendError as exc:
        return f"unknown ({exc})"


def judge_cell(
    backend: JudgeBackend, record: RunRecord, ground_truth: str, variant: int = 0, rubric: Rubric | None = None
) -> JudgeVerdict:
    """Judge one cell: one retry on a failed call or a reply that fails the parse, then `judge_excluded`.

    The judge sees what the rubric names (`shown_transcript`): under v2 the whole run with tool
    outputs and the injection point marked.
    """
    rubric = rubric or load_rubric()
    shown = shown_transcript(rubric, record)
    prompt = rubric.render(variant, shown, ground_truth)
    failures: list[str] = []
    raw = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            raw = backend.complete(prompt)
        except JudgeBackendError as exc:
            failures.append(f"attempt {attempt}: call failed: {exc}")
            continue
        try:
            verdict = parse_reply(raw, shown, variant, backend.name, _version_of(backend))
        except JudgeParseError as exc:
            failures.append(f"attempt {attempt}: {exc}")
            continue
        return replace(verdict, attempts=attempt)
    return JudgeVerdict(
        None,
        None,
        None,
        variant,
        raw if isinstance(raw, str) else repr(raw),
        backend.name,
        _version_of(backend),
        STATUS_EXCLUDED,
        MAX_ATTEMPTS,
        "; ".join(failures),
    )
