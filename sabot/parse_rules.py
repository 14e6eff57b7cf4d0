"""The published parse rules, compiled from their registered data: verdict tokens and FLAGS lines.

The patterns live in `data/standard/`; this module only compiles them and applies them. Adapters
(to build reviewer prompts) and the scorer (to read what reviewers said) share these functions,
so the two surfaces cannot drift apart.
"""

import re
from dataclasses import dataclass

_FLAG_NAMES = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL}


def compile_rule(rule: dict) -> re.Pattern:
    """Compile a registered {pattern, flags} entry."""
    flags = 0
    for name in rule.get("flags", []):
        flags |= _FLAG_NAMES[name]
    return re.compile(rule["pattern"], flags)


def rule_matches(rule: dict, text: str) -> bool:
    pattern = compile_rule(rule)
    if rule.get("match") == "full":
        return pattern.fullmatch(text) is not None
    return pattern.search(text) is not None


@dataclass(frozen=True)
class Verdict:
    decision: str  # "APPROVE" or "REJECT"
    reason: str | None


@dataclass(frozen=True)
class FlagsRule:
    """The §10.2-§10.3 FLAGS parse rule and its none-forms, compiled from one registered file."""

    flags: re.Pattern
    none_forms: re.Pattern

    @classmethod
    def from_doc(cls, doc: dict) -> "FlagsRule":
        return cls(flags=compile_rule(doc["parse"]), none_forms=compile_rule(doc["none_forms"]))

    def flags_line(self, text: str) -> str | None:
        """The content of the first FLAGS line of a text, or None when it has none."""
        match = self.flags.search(text)
        return match.group(1) if match else None

    def is_noticed(self, content: str) -> bool:
        """A FLAGS content counts as a notice only when non-empty and not a registered none-form."""
        return bool(content) and self.none_forms.match(content) is None


# What the pipelines' reviewers are prompted with and parsed by at run time. The scorer never reads
# these names: it takes its FLAGS rule from the `uses` of the ruleset it applies.
PIPELINE_VERDICT_PROTOCOL = "standard/verdict_protocol.v0.1.1.json"
PIPELINE_FLAGS_PROTOCOL = "standard/flags_protocol.v0.2.0.json"


@dataclass(frozen=True)
class Protocols:
    """The compiled verdict-token and FLAGS rules the pipelines run with."""

    verdict: re.Pattern
    flags_rule: FlagsRule
    reviewer_addendum: str

    @classmethod
    def from_registry(cls, registry, verdict_rel: str = PIPELINE_VERDICT_PROTOCOL, flags_rel: str = PIPELINE_FLAGS_PROTOCOL) -> "Protocols":
        flags_doc = registry.doc(flags_rel)
        return cls(
            verdict=compile_rule(registry.field(verdict_rel, "parse")),
            flags_rule=FlagsRule.from_doc(flags_doc),
            reviewer_addendum=flags_doc["reviewer_addendum"],
        )

    @property
    def flags(self) -> re.Pattern:
        return self.flags_rule.flags

    @property
    def none_forms(self) -> re.Pattern:
        return self.flags_rule.none_forms

    def parse_verdict(self, text: str) -> Verdict | None:
        """First verdict token in a reply; None means no token, so no hard-tier act."""
        match = self.verdict.search(text)
        if match is None:
            return None
        reason = match.group(2).strip() if match.group(2) else None
        return Verdict(match.group(1).upper(), reason or None)

    def flags_line(self, text: str) -> str | None:
        return self.flags_rule.flags_line(text)

    def is_noticed(self, content: str) -> bool:
        return self.flags_rule.is_noticed(content)


def anchored(content: str, anchors) -> list[str]:
    """Registered anchors found in a FLAGS content: case-insensitive substrings, no word boundary."""
    lowered = content.lower()
    return [a for a in anchors if a.lower() in lowered]


def named(text: str, anchors) -> list[str]:
    """Registered anchors a text names: case-insensitive, on token boundaries (the anchor-collision
    review's R4), so "40 km" is not named inside "140 km", nor "refuel" inside "refueling"; a
    hyphen, quote or space ends a token, so "P-3117-B" names "P-3117"."""
    return [a for a in anchors if re.search(rf"(?<!\w){re.escape(a)}(?!\w)", text, re.IGNORECASE)]
