"""Reading a reference-corpus checkout: every file validated before anything is stored.

Layout: `<root>/<corpus_dir>/<framework>/<config>/<task>/<operator>/seed<N>/<file>`, where the
operator directory of a no-fault baseline is `baseline`. A malformed file stops the import with a
`CorpusError` naming it; a partial corpus is fine: each absent file is reported by name, and a
fault run never made because its baseline failed is reported as not run, not as missing.

Refused, each by name, before the store sees anything: a symbolic link anywhere in the corpus (an
import reads the corpus's own files, never what a link points at), two files for one cell (`seed015`
beside `seed15`), a file over the registered size cap (`data/standard/corpus_import.v1.json`), any
entry that is not a regular file (a FIFO, socket or device: refused unread, where reading could
wait forever), and text the store cannot hold (a lone surrogate escape such as `\\ud800`), naming
the field.

The scan keeps no file's content, and never holds one whole: a file is streamed (`sabot.json_stream`),
a run's events validated one at a time, and the file is read again by the store itself when it
lands (its hash checked against the scan's), so an import's memory follows one event, not a file.
"""

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sabot.matrix import Cell, Probe
from sabot.registry import WaveDef, sha256_bytes
from sabot.json_stream import StreamError, read_document
from sabot.trace import RunRecord, TraceError, parse_event, parse_runresult

RUN_FILES = {"runresult.json": "fault", "baseline-runresult.json": "baseline"}
VERDICT_FILES = {
    "cellverdict.json": "cellverdict",
    "judgeverdict.json": "judgeverdict",
    "judgeverdict-variant1.json": "judgeverdict-variant1",
}
BASELINE_DIR = "baseline"
LIMITS = "standard/corpus_import.v1.json"
EVENTS = ("trace", "events")  # the array of a run file streamed one item at a time


class CorpusError(ValueError):
    """A corpus file that cannot be imported; the message names the file."""


@dataclass(frozen=True)
class CorpusFile:
    """A validated corpus file, by reference: its content is read again when asked for."""

    kind: str  # fault | baseline | cellverdict | judgeverdict | judgeverdict-variant1
    operator: str | None
    probe: Probe
    rel_path: str  # relative to the corpus root
    sha256: str
    path: Path = field(repr=False)
    size: int = 0
    run_failed: bool | None = None  # run files: the run errored or its task failed

    @property
    def body(self) -> str:
        """The file's text, as scanned: a file that changed since is refused by name."""
        raw = self.path.read_bytes()
        if sha256_bytes(raw) != self.sha256:
            raise CorpusError(
                f"{self.rel_path}: changed since the corpus was scanned (sha256 {sha256_bytes(raw)[:12]}, scanned {self.sha256[:12]})"
            )
        return raw.decode("utf-8")

    @property
    def record(self) -> RunRecord | None:
        return parse_runresult(json.loads(self.body), self.rel_path) if self.kind in RUN_FILES.values() else None


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
        return {(f.operator, f.probe.key): f for f in self.files if f.kind in RUN_FILES.values()}


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
    expected = {
        "framework": probe.framework,
        "config": probe.config,
        "task": probe.task,
        "seed": probe.seed,
        "operator": operator,
    }
    for name, value in expected.items():
        if getattr(record, name) != value:
            raise CorpusError(f"{source}: trace.{name} is {getattr(record, name)!r} but the path says {value!r}")


def _read_file(wave: WaveDef, root: Path, path: Path, max_bytes: int) -> CorpusFile:
    source = path.relative_to(root).as_posix()
    probe, operator = _coordinates(wave, path.relative_to(root / wave.corpus_dir), source)
    _refuse_irregular(path, root)  # again at the read: it may have been swapped since the walk
    size = path.lstat().st_size
    if size > max_bytes:
        raise CorpusError(
            f"{source}: {size / 2**20:.1f} MB, over the registered cap of {max_bytes / 2**20:g} MB for one corpus file ({LIMITS}); nothing was imported"
        )
    kind = RUN_FILES.get(path.name) or VERDICT_FILES[path.name]
    if kind in ("fault", "baseline") and (kind == "baseline") != (operator is None):
        raise CorpusError(
            f"{source}: a {path.name} does not belong in the {'baseline' if operator is None else operator} directory"
        )
    is_run = kind in ("fault", "baseline")
    try:
        obj, sha256 = read_document(path, EVENTS if is_run else (), _event_checker(source))
    except StreamError as exc:
        raise CorpusError(f"{source}: {exc}") from None
    except TraceError as exc:
        raise CorpusError(str(exc)) from None
    failed = None
    if is_run:
        try:
            record = parse_runresult(obj, source)  # its events were checked one by one as they streamed past
        except TraceError as exc:
            raise CorpusError(str(exc)) from exc
        _check_matches_path(record, probe, operator, source)
        failed = bool(record.error) or not record.task_passed
    elif not isinstance(obj, dict):
        raise CorpusError(f"{source}: expected a JSON object")
    return CorpusFile(kind, operator, probe, source, sha256, path, size, failed)


def _event_checker(source: str):
    """Each streamed event read as the scorer will read it, and no seq twice."""
    seqs: set[int] = set()

    def check(index: int, obj) -> None:
        seq = parse_event(obj, source, index).seq
        if seq in seqs:
            raise TraceError(source, "trace.events", "duplicate seq numbers")
        seqs.add(seq)

    return check


def expected_path(wave: WaveDef, cell_or_probe) -> str:
    if isinstance(cell_or_probe, Cell):
        p, op_dir, name = cell_or_probe.probe, cell_or_probe.operator, "runresult.json"
    else:
        p, op_dir, name = cell_or_probe, BASELINE_DIR, "baseline-runresult.json"
    return f"{wave.corpus_dir}/{p.framework}/{p.config}/{p.task}/{op_dir}/seed{p.seed}/{name}"


def scan(wave: WaveDef, root: Path, max_file_bytes: int) -> CorpusScan:
    """Read and validate every trace and verdict file of a wave's corpus directory."""
    root = Path(root)
    base = root / wave.corpus_dir
    if not base.is_dir():
        raise CorpusError(f"{base}: no such corpus directory (wave {wave.name} reads {wave.corpus_dir}/)")
    result = CorpusScan(wave.name, root)
    paths = _corpus_files(root, base)
    _refuse_duplicate_cells(wave, root, base, paths)
    for path in paths:
        result.files.append(_read_file(wave, root, path, max_file_bytes))
    _report_gaps(wave, result)
    return result


def _corpus_files(root: Path, base: Path) -> list[Path]:
    """The corpus's trace and verdict files, in order; a symbolic link anywhere is refused."""
    found = []
    for directory, subdirs, names in os.walk(base):  # never follows a link
        here = Path(directory)
        for name in sorted(subdirs + names):
            path = here / name
            if path.is_symlink():
                raise CorpusError(
                    f"{path.relative_to(root)}: a symbolic link (to {os.readlink(path)}); a corpus must hold "
                    "its own files, and an import never follows a link out of it"
                )
        for name in names:  # before any is opened: reading a FIFO would wait for a writer forever
            _refuse_irregular(here / name, root)
        for name in names:
            path = here / name
            rel = path.relative_to(base)
            if not name.endswith(".json"):
                continue
            if len(rel.parts) == 6 and (name in RUN_FILES or name in VERDICT_FILES):
                found.append(path)
            elif len(rel.parts) > 1:
                raise CorpusError(f"{path.relative_to(root)}: not a file the corpus layout defines")
    return sorted(found)


def _refuse_irregular(path: Path, root: Path) -> None:
    """A FIFO, socket or device (anything but a regular file) in the corpus is refused by name, unread."""
    mode = path.lstat().st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a character device"
            if stat.S_ISCHR(mode)
            else "a block device"
            if stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise CorpusError(
            f"{path.relative_to(root)}: {kind}; a corpus holds regular files only, and an import reads nothing else; "
            "nothing was imported"
        )


def _refuse_duplicate_cells(wave: WaveDef, root: Path, base: Path, paths: list[Path]) -> None:
    """Two files that stand for one cell (`seed015` beside `seed15`) are refused, both named: one
    would otherwise win silently."""
    seen: dict[tuple, str] = {}
    for path in paths:
        source = path.relative_to(root).as_posix()
        probe, operator = _coordinates(wave, path.relative_to(base), source)
        key = (path.name, operator, probe.key)
        if key in seen:
            raise CorpusError(
                f"{seen[key]} and {source}: two files for one {'baseline' if operator is None else 'cell'} "
                f"({operator or 'baseline'} {probe.key}); keep one"
            )
        seen[key] = source


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
            failed = baseline is not None and baseline.run_failed
            (result.not_run if failed else result.missing).append(expected_path(wave, cell))
