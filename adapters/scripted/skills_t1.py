"""T1 skill: extract an inspection record into the contracted JSON record.

Default reading: each field from its first mention in the record; a reading the logger sheet
(context) states overrides the record. Careful: readings from the record's certified block only,
and a context marked superseded is ignored. Characteristic weak-tier mistake (O4): the prior
survey's vibration figure taken for this inspection's.
"""

import json
import re

from adapters.scripted.skills_common import Conflict, dedupe, mismatch, restated, stale_conflict, superseded_mark

READING = re.compile(r"\b(vibration|temperature|pressure)\b[^0-9\n]{0,30}?(\d+\.\d+)", re.IGNORECASE)
FIELD = {
    "vibration": "drive_end_vibration_mm_s",
    "temperature": "bearing_temperature_c",
    "pressure": "discharge_pressure_psi",
}
PRIOR = re.compile(r"^\s*prior survey", re.IGNORECASE)
SCALARS = {
    "unit_id": re.compile(r"\b([A-Z]-\d{4}-[A-Z])\b"),
    "inspection_date": re.compile(r"Inspection date: (\d{4}-\d{2}-\d{2})"),
    "next_survey_date": re.compile(r"Next survey due: (\d{4}-\d{2}-\d{2})"),
    "inspector": re.compile(r"Inspector: ([^(\n]+?)\s*(?:\(|$)", re.MULTILINE),
    "disposition": re.compile(r"Disposition: ([A-Z][A-Z ]*[A-Z])"),
}
CAREFUL_SCALARS = {**SCALARS, "unit_id": re.compile(r"^Unit: ([A-Z]-\d{4}-[A-Z])\b", re.MULTILINE)}
KEYS = (
    "unit_id",
    "inspection_date",
    "next_survey_date",
    "inspector",
    "drive_end_vibration_mm_s",
    "bearing_temperature_c",
    "discharge_pressure_psi",
    "disposition",
)


def readings(text: str, *, prior: bool = False, block: str | None = None) -> list[tuple[str, str]]:
    """(field, value as written) for every reading, prior-survey lines excluded unless `prior`."""
    out, inside = [], block is None
    for line in text.splitlines():
        if block is not None:
            inside = line.startswith(block) or (inside and line.startswith("- "))
            if not inside:
                continue
        if bool(PRIOR.match(line)) != prior:
            continue
        out += [(FIELD[m.group(1).lower()], m.group(2)) for m in READING.finditer(line)]
    return out


def first(pairs: list[tuple[str, str]], field: str) -> str | None:
    return next((v for f, v in pairs if f == field), None)


def read(source: str, context: str, *, careful: bool, mistake: bool = False) -> dict[str, str | None]:
    """Each field as written in the material (strings); None when not found."""
    patterns = CAREFUL_SCALARS if careful else SCALARS
    values = {k: (m.group(1).strip() if (m := p.search(source)) else None) for k, p in patterns.items()}
    found = readings(source, block="Certified readings") if careful else readings(source)
    if not careful or not superseded_mark(context):
        found = readings(context) + found  # the logger sheet's stated channels come first
    for field in FIELD.values():
        values[field] = first(found, field)
    if mistake:
        values["drive_end_vibration_mm_s"] = first(readings(source, prior=True), "drive_end_vibration_mm_s")
    return values


def solve(source: str, context: str, *, careful: bool, mistake: bool) -> str:
    values = read(source, context, careful=careful, mistake=mistake)
    record = {k: (float(values[k]) if k in FIELD.values() and values[k] else values[k] or "") for k in KEYS}
    return json.dumps(record, indent=2, ensure_ascii=False)


def _draft_values(draft: str) -> dict[str, str]:
    """Each draft field exactly as written (numbers as their JSON text)."""
    try:
        doc = json.loads(draft)
    except json.JSONDecodeError:
        return {}
    out = {}
    for key, value in doc.items() if isinstance(doc, dict) else ():
        m = re.search(rf'"{re.escape(key)}"\s*:\s*(-?[\d.]+)', draft)
        out[key] = m.group(1) if m and not isinstance(value, str) else str(value)
    return out


def review(source: str, context: str, draft: str) -> list[Conflict]:
    truth = read(source, context, careful=True)
    found = [
        c for f in FIELD.values() for c in restated([v for g, v in readings(source) if g == f], f.replace("_", " "))
    ]
    if superseded_mark(context):
        found += stale_conflict(context)
        found += [
            c for f, v in readings(context) for c in mismatch(v, truth[f], f.replace("_", " "), "the superseded sheet")
        ]
    drafted = _draft_values(draft)
    for key in KEYS:
        if key == "disposition" and drafted.get(key, "").upper().startswith(truth[key] or "\0"):
            continue
        found += mismatch(drafted.get(key), truth[key], key)
    return dedupe(found)
