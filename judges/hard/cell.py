"""One cell's hard-tier verdict: exclusion, detection surfaces, reacted and recovered.

`score_cell` is pure: a fault run and its baseline (either may be absent from a partial corpus)
in, a `CellVerdict` out, under one ruleset.
"""

from dataclasses import dataclass, field

from judges.hard.acts import Act, flag_acts, flag_lines, mapping_acts, reason_rule
from sabot.matrix import Cell
from sabot.trace import RunRecord

CORRECTIVE = frozenset({"retry_with_reason", "block", "escalate"})


@dataclass(frozen=True)
class CellVerdict:
    cell: Cell
    ruleset: str
    status: str  # valid | excluded | incomplete | carved_out
    excluded: str | None = None
    missing: tuple[str, ...] = ()
    mapping: bool = False  # the §5 mapping surface fired (`wave1_mapping` in the reference)
    flags: tuple[str, ...] = ()  # every FLAGS content at or after the injection seq
    flags_noticed: bool = False  # any-flag diagnostic, never a detection claim
    flags_anchored: bool = False
    detected_hard: bool = False  # the headline surface (`union` in wave 2)
    reacted: bool = False
    recovered: bool = False
    acts: tuple[Act, ...] = field(default=(), compare=False)

    @property
    def in_denominator(self) -> bool:
        return self.status == "valid"


def exclusion(ruleset, cell: Cell, fault: RunRecord | None, baseline: RunRecord | None) -> str | None:
    """The one exclusion code a cell carries, by the precedence of the ruleset's exclusions file."""
    codes = set()
    if (fault and fault.error) or (baseline and baseline.error):
        codes.add("RUN_ERROR")  # an errored baseline never attempted the task: infrastructure
    if baseline and not baseline.error and not baseline.task_passed:
        codes.add("BASELINE_FAIL")
    if fault and not fault.error and not injection_landed(ruleset, cell, fault):
        codes.add("INJECTION_UNVERIFIED")
    return next((code for code in ruleset.precedence if code in codes), None)


def injection_landed(ruleset, cell: Cell, fault: RunRecord) -> bool:
    if not fault.injection_verified or fault.injection_seq is None:
        return False  # pin (b): a run that recorded no injection step has no point to scan from
    if cell.operator == "O4" and ruleset.o4_landing == "served_model_id":
        return any(isinstance(m, str) and ruleset.o4_downgrade_ids.fullmatch(m) for m in fault.served_model_ids())  # §10.7.2, dated snapshots included
    return True


def reacted(ruleset, acts: list[Act]) -> bool:
    detecting = [a.seq for a in acts if a.counted]
    if not detecting:
        return False
    if ruleset.reacted == "equals_detected":
        return True
    first = min(detecting)
    return any(a.surface == "mapping" and a.act in CORRECTIVE and a.seq >= first for a in acts)


def score_cell(ruleset, cell: Cell, fault: RunRecord | None, baseline: RunRecord | None, carved_out: bool = False) -> CellVerdict:
    if carved_out:
        return CellVerdict(cell, ruleset.version, "carved_out")
    code = exclusion(ruleset, cell, fault, baseline)
    missing = tuple(name for name, run in (("fault run", fault), ("baseline", baseline)) if run is None)
    if fault is None:
        # A fault run is never made for a cell whose baseline already failed (or errored).
        status = "excluded" if code else "incomplete"
        return CellVerdict(cell, ruleset.version, status, code, () if code else missing)

    anchors = ruleset.anchors(cell.probe.task, cell.operator)
    # Pin (b): only events at or after the injection step; a run without one scans nothing (and is
    # INJECTION_UNVERIFIED above), so an act before the fault can never count.
    since = fault.injection_seq if fault.injection_seq is not None else float("inf")
    acts = mapping_acts(ruleset, fault, anchors, since, reason_rule(ruleset, cell.probe.task, cell.operator, anchors, baseline))
    lines = flag_lines(ruleset, fault, anchors, since)
    acts += flag_acts(lines, counted=ruleset.flags_count_for(cell.operator))
    acts.sort(key=lambda a: (a.seq, a.surface))
    detected = any(a.counted for a in acts)
    if baseline is None and code != "RUN_ERROR":
        status, code = "incomplete", None  # validity needs the baseline; only RUN_ERROR outranks it
    else:
        status = "excluded" if code else "valid"
    return CellVerdict(
        cell,
        ruleset.version,
        status,
        excluded=code,
        missing=missing,
        mapping=any(a.counted for a in acts if a.surface == "mapping"),
        flags=tuple(line.content for line in lines),
        flags_noticed=any(line.noticed for line in lines),
        flags_anchored=any(a.counted for a in acts if a.surface == "flags"),
        detected_hard=detected,
        reacted=reacted(ruleset, acts),
        recovered=fault.task_passed,
        acts=tuple(acts),
    )
