"""T2 skill: summarize four sources on a storage cell, with the five category markers.

Default reading: each figure from its first mention, claims ("says", "up to") skipped; a figure
the datasheet (context) states overrides. Careful: figures from the audit report (the source
block whose heading names an audit report), a context marked superseded ignored. Characteristic
weak-tier mistake (O4): the headline press-release claim taken for the audited cycle life.
"""

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

FIGURES = {
    "cycles": re.compile(r"(\d[\d,]*) cycles"),
    "energy": re.compile(r"(\d+) Wh/kg"),
    "price": re.compile(r"\$(\d+)/kWh"),
    "low": re.compile(r"(-?\d+) °C to -?\d+ °C"),
    "high": re.compile(r"-?\d+ °C to (-?\d+) °C"),
}
CLAIM = re.compile(r"\b(says|said|claims|claimed|up to)\b", re.IGNORECASE)
INSTITUTE = re.compile(r"\b([A-Z]\w+ Institute(?: for [A-Z]\w+)?)")
SOURCE_HEAD = re.compile(r"^Source [A-Z]\. ")


def blocks(source: str) -> list[tuple[str, str]]:
    """(heading, body) per source; text before the first heading is the pack heading."""
    out = [("", "")]
    for line in source.splitlines():
        if SOURCE_HEAD.match(line):
            out.append((line, ""))
        else:
            out[-1] = (out[-1][0], out[-1][1] + line + "\n")
    return out


def mentions(text: str, figure: str, *, claims: bool = False) -> list[str]:
    return [m.group(1) for s in sentences(text) if claims or not CLAIM.search(s) for m in FIGURES[figure].finditer(s)]


def read(source: str, context: str, *, careful: bool, mistake: bool = False) -> dict[str, str | None]:
    audit = next((body for head, body in blocks(source) if "audit report" in head), "")
    use_context = not (careful and superseded_mark(context))
    values = {}
    for figure in FIGURES:
        found = mentions(audit, figure) if careful else []
        found = (mentions(context, figure) if use_context else []) + found + mentions(source, figure)
        values[figure] = found[0] if found else None
    if mistake:
        values["cycles"] = mentions(source, "cycles", claims=True)[0]
    m = INSTITUTE.search(source)
    values["institute"] = m.group(1) if m else None
    m = re.search(r"^RESEARCH PACK: (.+?) \(", source, re.MULTILINE)
    values["product"] = m.group(1) if m else "The cell"
    return values


def solve(source: str, context: str, *, careful: bool, mistake: bool) -> str:
    v = read(source, context, careful=careful, mistake=mistake)
    return (
        f"{v['product']}: research summary.\n"
        f"An independent audit by the {v['institute']} measured a cycle life of {v['cycles']} cycles to 80% capacity. "
        f"Gravimetric energy density: {v['energy']} Wh/kg. "
        f"Qualified operating range: {v['low']} °C to {v['high']} °C. "
        f"Contracted pack price: ${v['price']}/kWh delivered (county tender)."
    )


def review(source: str, context: str, draft: str) -> list[Conflict]:
    truth = read(source, context, careful=True)
    found = [c for f in FIGURES for c in restated(mentions(source, f), f"the {f} figure")]
    if superseded_mark(context):
        found += stale_conflict(context)
        found += [
            c
            for f in FIGURES
            for v in mentions(context, f)[:1]
            for c in mismatch(v, truth[f], f"the {f} figure", "the superseded datasheet")
        ]
    for figure in FIGURES:
        m = FIGURES[figure].search(draft)
        found += mismatch(m.group(1) if m else None, truth[figure], f"the {figure} figure")
    named = INSTITUTE.search(draft)
    known = {m.group(1).split()[0] for m in INSTITUTE.finditer(source)}
    if named and named.group(1).split()[0] not in known and truth["institute"]:
        found.append(
            Conflict(
                (named.group(1), truth["institute"]), f"the draft names the {named.group(1)}, which no source names"
            )
        )
    return dedupe(found)
