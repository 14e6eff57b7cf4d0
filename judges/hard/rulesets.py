"""Rulesets: the registered rule knobs of one spec revision, bound to the code that applies them.

A ruleset's hash covers its data file, every registry file it uses, and the source of the scorer
modules; it is the `code_version` of the cell verdicts, so any change to a rule, in data or in
code, marks exactly the verdicts (and what lies downstream) stale.
"""

import hashlib
import inspect
from dataclasses import dataclass
from functools import lru_cache

from sabot.protocols import Protocols

RETRY_REASON_RULES = ("any", "references_anomaly")
REACTED_RULES = ("equals_detected", "corrective_after_detection")
O4_LANDING_RULES = ("recorded", "served_model_id")


@dataclass(frozen=True)
class Ruleset:
    version: str
    flags_surface: bool
    flags_excluded_operators: frozenset[str]
    retry_reason: str
    block_rules: tuple[dict, ...]
    reacted: str
    o4_landing: str
    mapping: dict
    protocols: Protocols
    o4_model: str
    hash: str
    registry: object  # the Registry the ruleset was read from (anchors, strict classification)

    def anchors(self, task: str, operator: str) -> tuple[str, ...]:
        return self.registry.anchors(task, operator)

    def flags_count_for(self, operator: str) -> bool:
        return self.flags_surface and operator not in self.flags_excluded_operators


def _choice(value, allowed, where):
    if value not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return value


@lru_cache(maxsize=1)
def scorer_source_hash() -> str:
    """Hash of the scorer's code: a change to any rule function changes every ruleset hash."""
    from judges.hard import acts, cell  # the modules whose code decides a verdict
    from sabot import protocols

    source = "".join(inspect.getsource(m) for m in (acts, cell, protocols)) + inspect.getsource(Ruleset)
    return hashlib.sha256(source.encode()).hexdigest()


def load_ruleset(registry, version: str) -> Ruleset:
    entry = registry.ruleset_doc(version)
    where = f"data/{entry.path}"
    rules, uses = entry.doc["rules"], entry.doc["uses"]
    mapping_rel = f"standard/{uses['mappings']}"
    mapping = registry.doc(mapping_rel)
    block_name = rules["block_pattern"]
    if block_name not in mapping["block_patterns"]:
        raise ValueError(f"{where}: block_pattern {block_name!r} is not defined in data/{mapping_rel}")
    used = [entry.sha256] + [registry.files[f"standard/{rel}"].sha256 for rel in sorted(uses.values())]
    digest = hashlib.sha256("".join(used + [scorer_source_hash()]).encode()).hexdigest()
    return Ruleset(
        version=version,
        flags_surface=bool(rules["flags_surface"]),
        flags_excluded_operators=frozenset(rules["flags_excluded_operators"]),
        retry_reason=_choice(rules["retry_reason"], RETRY_REASON_RULES, f"{where}: rules.retry_reason"),
        block_rules=tuple(mapping["block_patterns"][block_name]["any_of"]),
        reacted=_choice(rules["reacted"], REACTED_RULES, f"{where}: rules.reacted"),
        o4_landing=_choice(rules["o4_landing"], O4_LANDING_RULES, f"{where}: rules.o4_landing"),
        mapping=mapping,
        protocols=Protocols.from_registry(registry),
        o4_model=registry.field("standard/models.v0.1.1.json", "o4_downgrade_model"),
        hash=f"{version}-{digest[:12]}",
        registry=registry,
    )
