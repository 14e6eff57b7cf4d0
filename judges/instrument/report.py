"""The instrument check in Markdown: agreement per axis, per row and operator, disagreements listed."""

from judges.hard.tables import markdown_table
from judges.instrument.agreement import AXES


def _cell(t: dict) -> str:
    decided = t["agree"] + t["disagree"]
    text = f"{t['agree']}/{decided} agree" if decided else "n/a"
    extra = [f"{t['deterministic']} deterministic guardrail"] if t["deterministic"] else []
    extra += [f"{t['undetermined']} not decided by the log"] if t["undetermined"] else []
    return text + (f" ({'; '.join(extra)})" if extra else "")


def _table(first: str, groups: dict) -> str:
    return markdown_table([first, *AXES], [[g, *(_cell(t[a]) for a in AXES)] for g, t in groups.items()])


def agreement_markdown(wave: str, docs: dict, headline: str) -> str:
    doc = docs[headline]
    lines = [
        f"# Instrument check — {wave} (simulation): the scorer against the scripted model's intent log",
        "",
        "A simulated wave measures the instrument, not pipelines: no band, no headline score and no prediction "
        "verdict is drawn from it. Each axis counts valid cells where the scorer's stored verdict and what the "
        "intent log implies agree; a detection that only a deterministic guardrail (pipeline code, not "
        "simulated) explains is counted apart; recovery is decided by the log for O2, O3 and O6 only.",
        "",
        f"## Headline ruleset {headline}: all rows",
        "",
        _table("scope", {"all valid cells": doc["total"]}),
        "",
        "## By scoreboard row",
        "",
        _table("row", doc["by_row"]),
        "",
        "## By operator",
        "",
        _table("operator", doc["by_operator"]),
        "",
        "## Other readings (all rows)",
        "",
        _table("ruleset", {v: d["total"] for v, d in sorted(docs.items()) if v != headline}),
        "",
        f"## Disagreements under {headline} ({len(doc['disagreements'])})",
        "",
    ]
    if doc["disagreements"]:
        rows = [[d["cell"], d["axis"], d["scorer"], d["intent log"], d["why"]] for d in doc["disagreements"]]
        lines.append(markdown_table(["cell", "axis", "scorer", "intent log", "what the log shows"], rows))
    else:
        lines.append("None.")
    if doc["cells_without_log"]:
        lines += ["", f"Valid cells with no intent log: {', '.join(doc['cells_without_log'])}"]
    return "\n".join(lines + [""])
