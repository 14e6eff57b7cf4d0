"""Rulesets: the registered rule knobs of one spec revision, bound to the code that applies them.

A ruleset is all of its rules: the mapping, exclusion precedence, FLAGS rule and none-forms,
anchors and strict classification are read from the files its `uses` names (a ruleset that does
not use a FLAGS rule or anchors has none), never from a file named in code. Its hash covers its
data file, every file it uses, and the source of the scorer modules; it is the `code_version` of
the cell verdicts, so any change to a rule, in data or in code, marks exactly the verdicts (and
what lies downstream) stale.
"""

import hashlib
import re
import inspect
from dataclasses import dataclass
from functools import lru_cache

from judges.hard.strict import StrictRule
from sabot.model_ids import MODEL_IDS, served_pattern
from sabot.parse_rules import FlagsRule

RETRY_REASON_RULES = ("any", "references_anomaly", "references_anomaly_narrow", "names_planted_anomaly")
REACTED_RULES = ("equals_detected", "corrective_after_detection")
O4_LANDING_RULES = ("recorded", "served_model_id")
EXCLUSION_CODES = frozenset({"RUN_ERROR", "BASELINE_FAIL", "INJECTION_UNVERIFIED"})  # the codes `cell.exclusion` can raise
USES = ("mappings", "exclusions", "flags", "anchors", "strict")
MODELS_DOC = "standard/models.v0.1.1.json"  # the pinned model ids: a pin of the standard, not a scoring rule


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
    precedence: tuple[str, ...]  # exclusion codes, highest first
    flags: FlagsRule | None  # None: the ruleset has no FLAGS rule, so no FLAGS line is read
    anchor_sets: dict | None  # task -> operator -> anchors; None: no anchors registered
    strict: StrictRule | None  # the strict-floor classification, where the ruleset carries one
    o4_model: str
    o4_downgrade_ids: re.Pattern  # served ids that count as the O4 target: the pin or a dated snapshot (§10.7.2)
    hash: str
    files: dict  # every registry file the ruleset reads -> its sha256 as loaded
    reason_reading: "ReasonReading | None" = None  # the narrow retry-reason reading, where the ruleset registers it

    def anchors(self, task: str, operator: str) -> tuple[str, ...]:
        if self.anchor_sets is None:
            return ()
        try:
            return tuple(self.anchor_sets[task][operator])
        except KeyError:
            raise ValueError(f"ruleset {self.version}: its anchors file registers no anchors for {task}/{operator}") from None

    def flags_count_for(self, operator: str) -> bool:
        return self.flags_surface and operator not in self.flags_excluded_operators


@dataclass(frozen=True)
class ReasonReading:
    """The narrow retry-reason rule as registered data (rules.retry_reason_reading): which anchors
    of a cell a retry or re-plan reason may quote to reference THE planted anomaly."""

    signal_free_operators: frozenset[str]  # whose anchors carry no signal (O4, §10.3 v0.2.1): none qualify
    vocabulary_operators: frozenset[str]  # whose dropped anchors are ordinary task vocabulary: only the strict kept ones qualify
    baseline_scope: str  # "own": an anchor on the cell's own clean baseline does not qualify
    registered: str

    @classmethod
    def from_doc(cls, doc: dict, where: str) -> "ReasonReading":
        scope = _choice(doc["baseline_scope"], ("own",), f"{where}: rules.retry_reason_reading.baseline_scope")
        return cls(frozenset(doc["signal_free_operators"]), frozenset(doc["vocabulary_operators"]), scope, doc["registered"])

    def candidates(self, ruleset: "Ruleset", task: str, operator: str) -> tuple[tuple[str, ...], str]:
        """(the anchors a reason may quote, why the others do not) before the baseline test."""
        if operator in self.signal_free_operators:
            return (), f"{operator} anchors are signal-free (they fire on clean baselines at the faulted rate)"
        anchors = ruleset.anchors(task, operator)
        if operator in self.vocabulary_operators:
            kept = ruleset.strict.kept_anchors(task, operator)
            return tuple(a for a in anchors if a in kept), "ordinary task vocabulary (not in the injected claim)"
        return anchors, ""


def _choice(value, allowed, where):
    if value not in allowed:
        raise ValueError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return value


@lru_cache(maxsize=1)
def scorer_source_hash() -> str:
    """Hash of the scorer's code: a change to any rule function changes every ruleset hash."""
    from judges.hard import acts, cell, strict  # the modules whose code decides a verdict
    from sabot import parse_rules

    source = "".join(inspect.getsource(m) for m in (acts, cell, strict, parse_rules)) + inspect.getsource(Ruleset) + inspect.getsource(ReasonReading)
    return hashlib.sha256(source.encode()).hexdigest()


def _precedence(doc: dict, where: str) -> tuple[str, ...]:
    precedence = tuple(doc.get("precedence", ()))
    if set(precedence) != EXCLUSION_CODES or len(precedence) != len(EXCLUSION_CODES):
        raise ValueError(f"{where}: precedence must order exactly {', '.join(sorted(EXCLUSION_CODES))}; got {list(precedence)}")
    return precedence


def with_candidates(registry, mapping_file: str, mapping: dict) -> tuple[dict, list[str]]:
    """The mapping with the rows of every registered candidate mapping that extends it, and those files.

    A candidate's rows only add frameworks (an existing framework's row is never replaced), so they are
    listed among the ruleset's files but kept out of its digest: the rules a published report names
    by hash are the same rules, and a registered file is never edited (a change is a new file)."""
    rels = sorted(r for r, f in registry.files.items() if r.startswith("standard/") and f.doc.get("extends") == mapping_file
                  and f.doc.get("name") == "detection_act_mappings_candidates")
    if not rels:
        return mapping, []
    frameworks = dict(mapping["frameworks"])
    for rel in rels:
        for name, row in registry.files[rel].doc["frameworks"].items():
            if name in frameworks:
                raise ValueError(f"data/{rel}: candidate row {name!r} would replace the row data/standard/{mapping_file} publishes")
            frameworks[name] = row
    return {**mapping, "frameworks": frameworks}, rels


def load_ruleset(registry, version: str) -> Ruleset:
    entry = registry.ruleset_doc(version)
    where = f"data/{entry.path}"
    rules, uses = entry.doc["rules"], entry.doc["uses"]
    unknown = sorted(set(uses) - set(USES))
    if unknown:
        raise ValueError(f"{where}: uses {', '.join(unknown)}, which the scorer does not apply (known: {', '.join(USES)})")
    for required in ("mappings", "exclusions"):
        if required not in uses:
            raise ValueError(f"{where}: uses no {required} file")
    rel = {name: f"standard/{file}" for name, file in uses.items()}
    docs = {name: registry.doc(r) for name, r in rel.items()}

    mapping, candidates = with_candidates(registry, uses["mappings"], docs["mappings"])
    block_name = rules["block_pattern"]
    if block_name not in mapping["block_patterns"]:
        raise ValueError(f"{where}: block_pattern {block_name!r} is not defined in data/{rel['mappings']}")
    retry_reason = _choice(rules["retry_reason"], RETRY_REASON_RULES, f"{where}: rules.retry_reason")
    if rules["flags_surface"] and not {"flags", "anchors"} <= set(uses):
        raise ValueError(f"{where}: rules.flags_surface needs a flags and an anchors file in uses")
    if retry_reason != "any" and "anchors" not in uses:
        raise ValueError(f"{where}: rules.retry_reason {retry_reason} needs an anchors file in uses")
    reading = None
    if retry_reason == "references_anomaly_narrow":
        if "strict" not in uses or "retry_reason_reading" not in rules:
            raise ValueError(f"{where}: rules.retry_reason references_anomaly_narrow needs a strict file in uses and rules.retry_reason_reading")
        reading = ReasonReading.from_doc(rules["retry_reason_reading"], where)

    read = sorted({*rel.values(), MODELS_DOC, MODEL_IDS})
    files = {entry.path: entry.sha256} | {r: registry.files[r].sha256 for r in read} | {r: registry.files[r].sha256 for r in candidates}
    digest = hashlib.sha256("".join([entry.sha256] + [files[r] for r in read] + [scorer_source_hash()]).encode()).hexdigest()
    return Ruleset(
        version=version,
        flags_surface=bool(rules["flags_surface"]),
        flags_excluded_operators=frozenset(rules["flags_excluded_operators"]),
        retry_reason=retry_reason,
        block_rules=tuple(mapping["block_patterns"][block_name]["any_of"]),
        reacted=_choice(rules["reacted"], REACTED_RULES, f"{where}: rules.reacted"),
        o4_landing=_choice(rules["o4_landing"], O4_LANDING_RULES, f"{where}: rules.o4_landing"),
        mapping=mapping,
        precedence=_precedence(docs["exclusions"], f"data/{rel['exclusions']}"),
        flags=FlagsRule.from_doc(docs["flags"]) if "flags" in docs else None,
        anchor_sets=docs["anchors"]["anchors"] if "anchors" in docs else None,
        strict=StrictRule.from_doc(docs["strict"]) if "strict" in docs else None,
        o4_model=registry.field(MODELS_DOC, "o4_downgrade_model"),
        o4_downgrade_ids=served_pattern(registry, "o4_downgrade_model"),
        hash=f"{version}-{digest[:12]}",
        files=files,
        reason_reading=reading,
    )
