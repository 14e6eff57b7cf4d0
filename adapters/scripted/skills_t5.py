"""T5 skill: answer a question from a small corpus with a verbatim citation.

Default reading: the depth from its first mention, a depth the protocol notice (context) states
overriding it; the citation is the first sentence on what opens the series. Careful: the depth
from the excerpt marked authoritative, a notice marked superseded ignored. Characteristic
weak-tier mistake (O4): the citation paraphrased instead of quoted.
"""

import difflib
import json
import re

from adapters.scripted.skills_common import (
    Conflict,
    dedupe,
    mismatch,
    restated,
    sentences,
    stale_conflict,
    superseded_mark,
)

DEPTH = re.compile(r"(\d+\.\d+) metres")
EXCERPT = re.compile(r"^E\d+\. ")


def authoritative(source: str) -> str:
    """The text of the excerpt whose heading marks it authoritative."""
    out, inside = [], False
    for line in source.splitlines():
        if EXCERPT.match(line):
            inside = "authoritative" in line
        elif inside:
            out.append(line)
    return "\n".join(out)


def depths(text: str) -> list[str]:
    return DEPTH.findall(text)


def read(source: str, context: str, *, careful: bool) -> dict:
    found = depths(authoritative(source)) if careful else []
    found = ([] if careful and superseded_mark(context) else depths(context)) + found + depths(source)
    citation = next((s for s in sentences(source) if "opens" in s and "frost" in s), "")
    event = re.search(r"first (?:(\w+) )?ground frost", citation)
    return {
        "depth": found[0] if found else None,
        "citation": citation,
        "event": f"first {event.group(1) + ' ' if event and event.group(1) else ''}ground frost",
    }


def solve(source: str, context: str, *, careful: bool, mistake: bool) -> str:
    v = read(source, context, careful=careful)
    answer = (
        f"The probe is set at {v['depth']} metres, and the seasonal reading series opens on the season's {v['event']}."
    )
    citation = v["citation"]
    if mistake:  # a paraphrase passed off as a quotation
        citation = f"The series opens at the first frost of the season, with the probe at {v['depth']} metres."
    return json.dumps({"answer": answer, "citation": citation}, indent=2, ensure_ascii=False)


def _norm(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").strip().strip('"\u201c\u201d').split())


def review(source: str, context: str, draft: str) -> list[Conflict]:
    truth = read(source, context, careful=True)
    found = restated(depths(source), "the probe depth")
    if superseded_mark(context):
        found += stale_conflict(context)
        found += [
            c for d in depths(context) for c in mismatch(d, truth["depth"], "the probe depth", "the superseded notice")
        ]
    try:
        doc = json.loads(draft)
    except json.JSONDecodeError:
        return dedupe(found)
    if not isinstance(doc, dict):
        return dedupe(found)
    answer, citation = str(doc.get("answer", "")), str(doc.get("citation", ""))
    for d in depths(answer)[:1]:
        found += mismatch(d, truth["depth"], "the probe depth")
    if citation and _norm(citation) not in _norm(source):
        corpus = sentences(source)
        best = max(corpus, key=lambda s: difflib.SequenceMatcher(None, _norm(citation), s).ratio())
        found.append(Conflict((citation, best), "the citation is not a verbatim quote of the corpus"))
    return dedupe(found)
