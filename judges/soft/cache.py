"""Cached judge predictions: scoring the soft tier never needs a model call.

Two formats:
  * the reference format of the published corpus (``judgeverdict.json`` / ``judgeverdict-variant1.json``):
    exactly the keys by_which_component, evidence_quote, noticed, prompt_variant, raw. It has no room
    for a backend, a status or attempts, so only an ok verdict can be written in it, and a reference
    object round-trips losslessly: ``to_reference(load_reference_verdict(obj, src)) == obj``;
  * the full cache entry (`to_entry` / `load_entry`) for verdicts this code produces, which keeps
    the backend, its version, the status, attempts and an exclusion's reason.

`soft_outcome` turns a hard-tier result and a (cached) verdict into the soft-tier flags of one cell
(SPEC v0.2.1 §2): DETECTED_SOFT is a notice with no hard act, never blended into the headline.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Callable, Hashable

from judges.soft.verdict import STATUS_EXCLUDED, STATUS_OK, JudgeVerdict

REFERENCE_KEYS = ("by_which_component", "evidence_quote", "noticed", "prompt_variant", "raw")
REFERENCE_BACKEND = "reference"
REFERENCE_FILE = re.compile(r"^judgeverdict(?:-variant(\d+))?\.json$")  # judgeverdict.json is variant 0


class CacheError(ValueError):
    """A cached verdict that does not follow its format; the message names the source and field."""

    def __init__(self, source: str, where: str, problem: str):
        super().__init__(f"{source}: {where}: {problem}")
        self.source, self.where, self.problem = source, where, problem


def _check(value, types: tuple, source: str, where: str):
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise CacheError(source, where, f"expected {names}, got {type(value).__name__} {value!r:.60}")
    return value


def load_reference_verdict(obj: dict, source: str) -> JudgeVerdict:
    """Read one reference judge file's object; checks keys, types and that `raw` says the same."""
    if not isinstance(obj, dict):
        raise CacheError(source, "judgeverdict", f"expected an object, got {type(obj).__name__}")
    missing = [k for k in REFERENCE_KEYS if k not in obj]
    extra = sorted(k for k in obj if k not in REFERENCE_KEYS)
    if missing or extra:
        raise CacheError(
            source,
            "judgeverdict",
            f"missing {missing} / unexpected {extra}: the reference keys are {list(REFERENCE_KEYS)}",
        )
    noticed = _check(obj["noticed"], (bool,), source, "noticed")
    component = _check(obj["by_which_component"], (str, type(None)), source, "by_which_component")
    quote = _check(obj["evidence_quote"], (str, type(None)), source, "evidence_quote")
    variant = _check(obj["prompt_variant"], (int,), source, "prompt_variant")
    raw = _check(obj["raw"], (str,), source, "raw")
    try:
        said = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CacheError(source, "raw", f"not JSON ({exc.msg})") from None
    fields_ = {"noticed": noticed, "by_which_component": component, "evidence_quote": quote}
    if not isinstance(said, dict) or any(said.get(k) != v for k, v in fields_.items()):
        raise CacheError(source, "raw", "the judge's raw reply disagrees with the recorded fields")
    return JudgeVerdict(noticed, component, quote, variant, raw, REFERENCE_BACKEND, None, STATUS_OK, None, None, source)


def to_reference(verdict: JudgeVerdict) -> dict:
    """The reference-format object (same keys as the published files); only for an ok verdict."""
    if not verdict.ok:
        raise ValueError(f"a {verdict.status} verdict has no reference form (it records no judgement); use to_entry")
    return {
        "by_which_component": verdict.by_which_component,
        "evidence_quote": verdict.evidence_quote,
        "noticed": verdict.noticed,
        "prompt_variant": verdict.prompt_variant,
        "raw": verdict.raw,
    }


def to_entry(verdict: JudgeVerdict) -> dict:
    """The full cache entry: every field of the verdict (the source it was read from excepted)."""
    entry = asdict(verdict)
    entry.pop("source")
    return entry


def load_entry(obj: dict, source: str) -> JudgeVerdict:
    names = [f.name for f in fields(JudgeVerdict) if f.name != "source"]
    missing = [k for k in names if k not in obj]
    extra = sorted(k for k in obj if k not in names)
    if missing or extra:
        raise CacheError(source, "entry", f"missing {missing} / unexpected {extra}")
    if obj["status"] not in (STATUS_OK, STATUS_EXCLUDED):
        raise CacheError(source, "status", f"unknown status {obj['status']!r}")
    if obj["status"] == STATUS_OK:
        _check(obj["noticed"], (bool,), source, "noticed")
    return JudgeVerdict(**obj, source=source)


def soft_outcome(hard_detected: bool, verdict: JudgeVerdict | None) -> dict:
    """The soft-tier flags of one cell from its hard-tier result and its cached verdict (no model call).

    detected_soft: the judge (ok) ruled a notice and there was no hard act (§2 DETECTED_SOFT);
    soft_notice:   any notice at all, hard or soft (the numerator of the soft-tier notice rate);
    judged:        a verdict exists and is ok (an excluded or missing judgement is itemized, not "no").
    """
    judged = verdict is not None and verdict.ok
    noticed = judged and verdict.noticed is True
    return {
        "detected_soft": noticed and not hard_detected,
        "soft_notice": bool(hard_detected) or noticed,
        "judged": judged,
    }


class VerdictCache:
    """Verdicts by key; `get_or_judge` calls the judge only on a miss (scoring a full cache calls none)."""

    def __init__(self):
        self.entries: dict[Hashable, JudgeVerdict] = {}
        self.misses = 0

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, key: Hashable, verdict: JudgeVerdict) -> None:
        self.entries[key] = verdict

    def get(self, key: Hashable) -> JudgeVerdict | None:
        return self.entries.get(key)

    def get_or_judge(self, key: Hashable, judge: Callable[[], JudgeVerdict]) -> JudgeVerdict:
        if key not in self.entries:
            self.misses += 1
            self.entries[key] = judge()
        return self.entries[key]


def reference_cache(root: Path) -> VerdictCache:
    """Every reference judge file under `root`, keyed (cell directory relative to root, prompt variant).

    The file name carries the variant (judgeverdict.json = 0, judgeverdict-variant<n>.json = n) and
    must agree with the file's prompt_variant.
    """
    root = Path(root)
    cache = VerdictCache()
    for path in sorted(root.rglob("judgeverdict*.json")):
        m = REFERENCE_FILE.match(path.name)
        if m is None:
            continue
        verdict = load_reference_verdict(json.loads(path.read_text(encoding="utf-8")), str(path))
        named = int(m.group(1) or 0)
        if verdict.prompt_variant != named:
            raise CacheError(
                str(path), "prompt_variant", f"{verdict.prompt_variant} but the file name says variant {named}"
            )
        cache.put((path.parent.relative_to(root).as_posix(), verdict.prompt_variant), verdict)
    return cache
