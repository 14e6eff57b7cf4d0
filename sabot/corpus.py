"""Reading a reference-corpus checkout: every file validated before anything is stored.

Layout: `<root>/<corpus_dir>/<framework>/<config>/<task>/<operator>/seed<N>/<file>`, where the
operator directory of a no-fault baseline is `baseline`. A malformed file stops the import with a
`CorpusError` naming it; a partial corpus is fine: each absent file is reported by name, and a
fault run never made because its baseline failed is reported as not run, not as missing.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from sabot.matrix import Cell, Probe
from sabot.registry import WaveDef, sha256_bytes
from sabot.trace import RunRecord, TraceError, parse_runresult

RUN_FILES = {"runresult.json": "fault", "baseline-runresult.json": "baseline"}
VERDICT_FILES = {"cellverdict.json": "cellverdict", "judgeverdict.json": "judgeverdict", "judgeverdict-variant1.json": "judgeverdict-variant1"}
BASELINE_DIR = "baseline"


class CorpusError(ValueError):
    """A corpus file that cannot be imported; the message names the file."""


@dataclass(frozen=True)
class CorpusFile:
    kind: str  # fault | baseline | cellverdict | judgeverdict | judgeverdict-variant1
    operator: str | None
    probe: Probe
    rel_path: str  # relative to the corpus root
    sha256: str
    body: str  # the file's text, stored verbatim
    record: RunRecord | None = None  # parsed, for run files


@dataclass
class CorpusScan:
    wave: str
    root: Path
    files: list[CorpusFile] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # expected files that are absent
    not_run: list[str] = field(default_factory=list)  # fault runs skipped because the baseline failed

    def digest(self) -> str:
        return digest_of((f.rel_path, f.sha256) for f in self.files)

    def runs(self) -> dict[tuple[str | None, str], CorpusFile]:
        return {(f.operator, f.probe.key): f for f in self.files if f.record is not None}


def digest_of(pairs) -> str:
    """One hash over (path, sha256) pairs, independent of their order."""
    return sha256_bytes("".join(f"{path} {sha}\n" for path, sha in sorted(pairs)).encode())


def _coordinates(wave: WaveDef, rel: Path, source: str) -> tuple[Probe, str | None]:
    framework, config, task, op_dir, seed_dir = rel.parts[:5]
    for value, allowed, what in (
        (framework, wave.frameworks, "framework"),
        (config, wave.configs, "config"),
        (task, wave.tasks, "task"),
        (op_dir, (*wave.operators, BASELINE_DIR), "operator"),
    ):
        if value not in allowed:
            raise CorpusError(f"{source}: unknown {what} {value!r} (expected one of {', '.join(allowed)})")
    if not seed_dir.startswith("seed") or not seed_dir[4:].isdigit() or int(seed_dir[4:]) not in wave.seeds:
        raise CorpusError(f"{source}: {seed_dir!r} is not a registered seed directory (seeds {list(wave.seeds)})")
    operator = None if op_dir == BASELINE_DIR else op_dir
    return Probe(framework, config, task, int(seed_dir[4:])), operator


def _check_matches_path(record: RunRecord, probe: Probe, operator: str | None, source: str) -> None:
    expected = {"framework": probe.framework, "config": probe.config, "task": probe.task, "seed": probe.seed, "operator": operator}
    for name, value in expected.items():
        if getattr(record, name) != value:
            raise CorpusError(f"{source}: trace.{name} is {getattr(record, name)!r} but the path says {value!r}")


def _read_file(wave: WaveDef, root: Path, path: Path) -> CorpusFile:
    source = path.relative_to(root).as_posix()
    probe, operator = _coordinates(wave, path.relative_to(root / wave.corpus_dir), source)
    raw = path.read_bytes()
    try:
        body = raw.decode("utf-8")
        obj = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{source}: not valid JSON ({exc})") from exc
    kind = RUN_FILES.get(path.name) or VERDICT_FILES[path.name]
    if kind in ("fault", "baseline") and (kind == "baseline") != (operator is None):
        raise CorpusError(f"{source}: a {path.name} does not belong in the {'baseline' if operator is None else operator} directory")
    record = None
    if kind in ("fault", "baseline"):
        try:
            record = parse_runresult(obj, source)
        except TraceError as exc:
            raise CorpusError(str(exc)) from exc
        _check_matches_path(record, probe, operator, source)
    elif not isinstance(obj, dict):
        raise CorpusError(f"{source}: expected a JSON object")
    return CorpusFile(kind, operator, probe, source, sha256_bytes(raw), body, record)


def expected_path(wave: WaveDef, cell_or_probe) -> str:
    if isinstance(cell_or_probe, Cell):
        p, op_dir, name = cell_or_probe.probe, cell_or_probe.operator, "runresult.json"
    else:
        p, op_dir, name = cell_or_probe, BASELINE_DIR, "baseline-runresult.json"
    return f"{wave.corpus_dir}/{p.framework}/{p.config}/{p.task}/{op_dir}/seed{p.seed}/{name}"


def scan(wave: WaveDef, root: Path) -> CorpusScan:
    """Read and validate every trace and verdict file of a wave's corpus directory."""
    root = Path(root)
    base = root / wave.corpus_dir
    if not base.is_dir():
        raise CorpusError(f"{base}: no such corpus directory (wave {wave.name} reads {wave.corpus_dir}/)")
    result = CorpusScan(wave.name, root)
    for path in sorted(base.rglob("*.json")):
        rel = path.relative_to(base)
        if len(rel.parts) == 6 and (path.name in RUN_FILES or path.name in VERDICT_FILES):
            result.files.append(_read_file(wave, root, path))
        elif len(rel.parts) > 1:
            raise CorpusError(f"{path.relative_to(root)}: not a file the corpus layout defines")
    _report_gaps(wave, result)
    return result


def _report_gaps(wave: WaveDef, result: CorpusScan) -> None:
    """Name every absent file of each (framework, config, task) block the corpus touches."""
    runs = result.runs()
    blocks = {(f.probe.framework, f.probe.config, f.probe.task) for f in result.files}
    for probe in wave.probes():
        if (probe.framework, probe.config, probe.task) not in blocks:
            continue
        baseline = runs.get((None, probe.key))
        if baseline is None:
            result.missing.append(expected_path(wave, probe))
        for operator in wave.operators:
            cell = Cell(operator, probe)
            if wave.is_carved_out(cell) or (operator, probe.key) in runs:
                continue
            failed = baseline is not None and (baseline.record.error or not baseline.record.task_passed)
            (result.not_run if failed else result.missing).append(expected_path(wave, cell))
