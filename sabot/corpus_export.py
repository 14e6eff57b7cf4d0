"""Export a wave in the reference corpus layout, so runs made here can be checked by the reference
scorer and submitted: runresult.json / baseline-runresult.json, cellverdict.json, judgeverdict*.json.
"""

import json
from pathlib import Path

from sabot.matrix import Probe
from sabot.registry import WaveDef
from sabot.store.runs import record_sql

RUNS_DIR = "harness/runs"


def cell_dir(root: Path, corpus_dir: str, probe: Probe, operator: str | None) -> Path:
    return (
        Path(root)
        / corpus_dir
        / probe.framework
        / probe.config
        / probe.task
        / (operator or "baseline")
        / f"seed{probe.seed}"
    )


def _write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
    return path


def export_wave(con, wave: WaveDef, ruleset: str, root: Path) -> list[Path]:
    """Write every present run of the wave, and its cell verdict under `ruleset`, under root/harness/runs/<wave>."""
    corpus_dir = f"{RUNS_DIR}/{wave.name}"
    written = []
    runs = con.execute(
        f"SELECT operator, probe, {record_sql()} FROM runs WHERE wave = ? AND status = 'present' ORDER BY probe, operator",
        [wave.name],
    ).fetchall()
    for operator, probe_key, record in runs:
        probe = Probe.parse(probe_key)
        name = "runresult.json" if operator else "baseline-runresult.json"
        written.append(_write(cell_dir(root, corpus_dir, probe, operator or None) / name, json.loads(record)))
    verdicts = con.execute(
        "SELECT operator, probe, excluded, detected_hard, reacted, recovered FROM cell_verdicts "
        "WHERE wave = ? AND ruleset = ? AND status IN ('valid', 'excluded')",
        [wave.name, ruleset],
    ).fetchall()
    for operator, probe_key, excluded, detected, reacted, recovered in verdicts:
        acts = con.execute(
            "SELECT act, component, reason, seq FROM acts WHERE wave = ? AND ruleset = ? AND operator = ? AND probe = ? AND surface = 'mapping' ORDER BY seq",
            [wave.name, ruleset, operator, probe_key],
        ).fetchall()
        verdict = {
            "acts": [dict(zip(("act", "component", "reason", "seq"), a)) for a in acts],
            "detected_hard": detected,
            "excluded": excluded,
            "reacted": reacted,
            "recovered": recovered,
        }
        written.append(
            _write(cell_dir(root, corpus_dir, Probe.parse(probe_key), operator) / "cellverdict.json", verdict)
        )
    judged = con.execute(
        "SELECT operator, probe, prompt_variant, raw, noticed, by_which_component, evidence_quote, backend, source "
        "FROM judge_verdicts WHERE wave = ? AND status = 'ok'",
        [wave.name],
    ).fetchall()
    for operator, probe_key, variant, raw, noticed, component, quote, _backend, _source in judged:
        name = "judgeverdict.json" if variant == 0 else f"judgeverdict-variant{variant}.json"
        obj = {
            "by_which_component": component,
            "evidence_quote": quote,
            "noticed": noticed,
            "prompt_variant": variant,
            "raw": raw,
        }
        written.append(_write(cell_dir(root, corpus_dir, Probe.parse(probe_key), operator) / name, obj))
    return written


def as_import_wave(wave: WaveDef) -> WaveDef:
    """The same wave, read back from an export."""
    from dataclasses import replace

    return replace(wave, source="import", corpus_dir=f"{RUNS_DIR}/{wave.name}")
