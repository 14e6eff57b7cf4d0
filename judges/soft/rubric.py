"""The fixed judge rubric (`data/standard/judge_rubric.v2.json`) and prompt rendering.

v1 showed the judge only the event texts from the injection seq on; v2 (2026-12-02) shows the
internal transcript §6 names: the whole run, tool outputs included, the injection point marked
(`transcript_scope: whole_run_marked`, `injection_marker`).

The templates hold the literal placeholders ``{transcript}`` and ``{ground_truth}`` once each. They
are substituted in ONE pass with a regex, not ``str.format``: the templates contain JSON braces, and a
ground-truth note or transcript that itself contains ``{transcript}`` must not be expanded again.

The rubric is a registered artifact. Like `sabot.tasks`, the loader refuses a file whose bytes moved
after registration; an unregistered file (before `sabot registry lock`) loads as it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sabot.registry import DATA_DIR, LOCK_NAME, RegistryError, sha256_bytes

RUBRIC_REL = "standard/judge_rubric.v2.json"
SCOPES = ("post_injection_texts", "whole_run_marked")
PLACEHOLDER = re.compile(r"\{(transcript|ground_truth)\}")
REPLY_KEYS = ("noticed", "by_which_component", "evidence_quote")


@dataclass(frozen=True)
class Rubric:
    name: str
    version: str
    rubric: str
    variants: dict[int, str]
    sections: dict[str, tuple[str, str]]  # "ground_truth" / "transcript" -> (opening, closing) marker lines
    output_schema: dict
    transcript_scope: str = "post_injection_texts"  # v1's: event texts from the injection seq on
    injection_marker: str | None = None  # the line standing before the first post-injection event (v2)

    def render(self, variant: int, transcript: str, ground_truth: str) -> str:
        if variant not in self.variants:
            raise KeyError(f"{self.name} {self.version}: no prompt variant {variant!r} (have {sorted(self.variants)})")
        values = {"transcript": transcript, "ground_truth": ground_truth}
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], self.variants[variant])


def parse_rubric(doc: dict, source: str) -> Rubric:
    """Validate a rubric document; every problem names the source and the field."""
    for key in ("name", "version", "rubric", "variants", "sections", "output_schema"):
        if key not in doc:
            raise RegistryError(f"{source}: missing field {key}")
    if doc["name"] != "judge_rubric":
        raise RegistryError(f"{source}: not a judge_rubric document")
    sections = {k: tuple(v) for k, v in doc["sections"].items()}
    if set(sections) != {"ground_truth", "transcript"} or any(len(v) != 2 for v in sections.values()):
        raise RegistryError(f"{source}: sections must give (opening, closing) markers for ground_truth and transcript")
    variants = {}
    for key, template in doc["variants"].items():
        found = sorted(PLACEHOLDER.findall(template))
        if found != ["ground_truth", "transcript"]:
            raise RegistryError(
                f"{source}: variants.{key} must hold {{transcript}} and {{ground_truth}} once each, found {found}"
            )
        missing = [m for pair in sections.values() for m in pair if m not in template]
        if missing:
            raise RegistryError(f"{source}: variants.{key} lacks section marker(s) {missing}")
        variants[int(key)] = template
    if not {0, 1} <= set(variants):
        raise RegistryError(f"{source}: variants 0 and 1 are required (the double-judged pass uses 1)")
    schema = doc["output_schema"]
    if sorted(schema.get("required", [])) != sorted(REPLY_KEYS):
        raise RegistryError(f"{source}: output_schema.required must be {list(REPLY_KEYS)}")
    scope = doc.get("transcript_scope", "post_injection_texts")
    if scope not in SCOPES:
        raise RegistryError(f"{source}: transcript_scope {scope!r} is not one of {', '.join(SCOPES)}")
    marker = doc.get("injection_marker")
    if scope == "whole_run_marked" and not marker:
        raise RegistryError(f"{source}: transcript_scope whole_run_marked needs an injection_marker line")
    if marker and any(marker not in template for template in variants.values()):
        raise RegistryError(f"{source}: every variant must tell the judge what the injection marker {marker!r} means")
    return Rubric(doc["name"], doc["version"], doc["rubric"], variants, sections, schema, scope, marker)


@lru_cache(maxsize=None)
def load_rubric(root: Path = DATA_DIR, rel: str = RUBRIC_REL) -> Rubric:
    path = Path(root) / rel
    raw = path.read_bytes()
    lock = Path(root) / LOCK_NAME
    registered = json.loads(lock.read_text())["files"].get(rel) if lock.exists() else None
    if registered is not None and registered != sha256_bytes(raw):
        raise RegistryError(f"{rel}: edited after registration (a change is a new version)")
    return parse_rubric(json.loads(raw), str(path))
