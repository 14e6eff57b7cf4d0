"""The strict injection-evidence floor and the clean-baseline base rates of the anchor rules.

The floor counts a FLAGS line only when it quotes text that could not exist unless the fault
landed (the registered injection-only anchors), drops the Magentic-One mapping surface (stall
noise) and has no O4 surface. It is published as a pair with the union, never instead of it.
Base rates run the same rules over clean baselines, where every hit is a false positive.

Every rule here comes from a ruleset's `uses` (FLAGS rule, anchors, strict classification); see
`floor_rules` for the board of a ruleset that carries no strict classification of its own.
"""

from collections import Counter
from dataclasses import dataclass

from sabot.matrix import Probe
from sabot.parse_rules import anchored

@dataclass(frozen=True)
class StrictRule:
    kept: dict  # task -> operator -> injection-only anchors
    zeroed_rows: frozenset[tuple[str, str]]

    @classmethod
    def from_doc(cls, doc: dict) -> "StrictRule":
        return cls(doc["kept"], frozenset(tuple(r) for r in doc["zeroed_mapping_rows"]))

    def kept_anchors(self, task: str, operator: str) -> tuple[str, ...]:
        return tuple(self.kept[task][operator])

    def is_blind(self, task: str, operator: str) -> bool:
        """No injection-only anchor: a zero here means the instrument cannot see, not silence."""
        return not self.kept_anchors(task, operator)

    def cell(self, protocols, row) -> bool:
        """Strict-floor detection for one cell row (mapping, flags, framework, config, task, operator)."""
        if row["mapping"] and (row["framework"], row["config"]) not in self.zeroed_rows:
            return True
        kept = self.kept_anchors(row["task"], row["operator"])
        return any(protocols.is_noticed(c) and anchored(c, kept) for c in row["flags"])


@dataclass(frozen=True)
class FloorRules:
    """The rules of a board's strict floor and base rates, and the ruleset they were taken from."""

    source: str  # ruleset version
    flags: object  # sabot.parse_rules.FlagsRule
    strict: StrictRule
    anchor_sets: dict  # task -> operator -> registered anchors

    def anchors(self, task: str, operator: str) -> tuple[str, ...]:
        return tuple(self.anchor_sets[task][operator])


def floor_rules(ruleset, readings) -> FloorRules:
    """A ruleset's own strict floor rules; a ruleset without a strict classification (v0.2.0: the
    floor shipped later, under v0.2.1) is paired, as published, with the last of the wave's
    readings that has one. None among them: a registration error, not a silent empty floor."""
    for candidate in [ruleset, *reversed(list(readings))]:
        if candidate.strict is not None and candidate.flags is not None and candidate.anchor_sets is not None:
            return FloorRules(candidate.version, candidate.flags, candidate.strict, candidate.anchor_sets)
    names = ", ".join(r.version for r in readings)
    raise ValueError(f"ruleset {ruleset.version}: no strict classification, FLAGS rule and anchors among it and the wave's readings ({names})")


def with_strict(rule: StrictRule, protocols, rows) -> list[dict]:
    """Rows with the `strict` and `blind` columns added."""
    return [{**r, "strict": rule.cell(protocols, r), "blind": rule.is_blind(r["task"], r["operator"])} for r in rows]


@dataclass(frozen=True)
class BaseRates:
    """Clean-baseline fires: (operator) and (task) tallies with their denominators."""

    hits: Counter  # (rule, "operator"|"task", key) -> fires
    trials: Counter  # ("operator"|"task", key) -> baselines scanned

    def rate(self, rule: str, axis: str, key: str) -> tuple[int, int]:
        return self.hits[(rule, axis, key)], self.trials[(axis, key)]


def base_rates(floor: FloorRules, baselines, operators) -> BaseRates:
    """Run the anchor rule and the strict rule over clean baselines (scanned from seq 0)."""
    protocols, rule = floor.flags, floor.strict
    hits, trials = Counter(), Counter()
    for run in baselines:
        contents = [c for c in (protocols.flags_line(e.text) for e in run.events if e.text) if c is not None]
        noticed = [c for c in contents if protocols.is_noticed(c)]
        for op in operators:
            trials[("operator", op)] += 1
            trials[("task", run.task)] += 1
            fired = {
                "anchor": any(anchored(c, floor.anchors(run.task, op)) for c in noticed),
                "strict": any(anchored(c, rule.kept_anchors(run.task, op)) for c in noticed),
            }
            for name, hit in fired.items():
                hits[(name, "operator", op)] += hit
                hits[(name, "task", run.task)] += hit
                hits[(name, "cell", f"{run.task}/{op}")] += hit
    return BaseRates(hits, trials)


def clean_fires(ruleset, baselines) -> dict[tuple[str, str], bool]:
    """(probe key, operator) -> whether the ruleset's FLAGS surface fires for that operator on the
    probe's clean baseline (a noticed FLAGS line holding one of its anchors, scanned from seq 0): the
    clean-baseline term a lift must clear, since the same line with no fault planted is noise."""
    fires = {}
    for run in baselines:
        key = Probe(run.framework, run.config, run.task, run.seed).key
        noticed = []
        if ruleset.flags is not None:
            contents = (ruleset.flags.flags_line(e.text) for e in run.events if e.text)
            noticed = [c for c in contents if c is not None and ruleset.flags.is_noticed(c)]
        for op in (ruleset.anchor_sets or {}).get(run.task, {}):
            fires[(key, op)] = ruleset.flags_count_for(op) and any(anchored(c, ruleset.anchors(run.task, op)) for c in noticed)
    return fires
