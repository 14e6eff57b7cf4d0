"""Reading the published reference tables (Markdown) the tests compare against."""

import json
from pathlib import Path


def markdown_rows(path: Path, heading: str) -> list[list[str]]:
    """The body rows of the first table after `heading`, as lists of stripped cells."""
    text = path.read_text()
    section = text[text.index(heading) :]
    lines = section[section.index("|---") :].splitlines()[1:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def reference_rows(path: Path, framework=None, config=None) -> list[dict]:
    """wave2-rows.json cells, with our column names added beside the reference ones."""
    rows = []
    for r in json.loads(path.read_text()):
        if framework and (r["framework"], r["config"]) != (framework, config):
            continue
        rows.append(
            {
                **r,
                "mapping": r["wave1_mapping"],
                "detected_hard": r["union"],
                "status": "excluded" if r["excluded"] else "valid",
            }
        )
    return rows
