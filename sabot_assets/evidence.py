"""`sabot verify`: every published number of a wave re-derived from its sealed evidence and the
registered rules, and compared with what the store (or a bundle) says; and `sabot wave export`'s
bundle, which carries what that needs to another machine, with no model call.

What is re-derived: each scored run checked against its seal; each cell verdict, under every
ruleset the wave reads, from those runs (`judges.hard`); each scoreboard from those verdicts, the
clean baselines and the stored judge verdicts (the soft tier's rulings are evidence here, as a model
call cannot be repeated offline); each Markdown report and the HTML page from those boards. The
first difference raises VerifyError naming what differs and where.

A bundle (`export_bundle`) is a directory:

    manifest.json                      format, wave, rulesets, and the SHA-256 of every other file
    manifest.sig                       the manifest's Ed25519 signature and the signer's public key
                                       (sabot_assets.bundle_trust: what it does and does not prove)
    harness/runs/<wave>/...            the runs and verdicts in the reference corpus layout
    rules/                             the registered data files and their lock
    project/<folder>/                  a project wave's registered files (sabot/: mapping, project,
                                       operators) and lock, and its pass criterion's files, verbatim;
                                       the store's pin of the registration is in the manifest
    seals.json                         per run file: the attempt it came from and that attempt's seal
                                       (an imported run: the landed file and its hash, body verbatim;
                                       a project's run: also its sealed attempt.json)
    evidence/judgements.json           the soft tier's verdicts the boards read
    published/<ruleset>/cells.json     the published cell verdicts
    published/<ruleset>/board.json     the published scoreboard
    published/<ruleset>/report.md      the published report; published/report.html, published/wave.json

Outside the store, a seal's HMAC cannot be checked (the key stays with the store): a bundle shows
that its numbers follow from its runs and rules and that its runs are the sealed ones it names. Who
made it is shown only by the manifest's signature checked under the exporter's published public key,
or by the manifest's SHA-256 compared with the published one (`sabot verify --key / --expect`).
"""

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from judges.hard.scoreboard import build_board
from judges.hard.report import render_markdown
from judges.hard.rulesets import load_ruleset
from judges.hard.strict import floor_rules
from judges.report.html import render_html
from sabot import runroot, seal
from sabot.corpus_export import RUNS_DIR, cell_dir, export_wave
from sabot.matrix import Cell, Probe
from sabot.provenance import kinds, provenance_label
from sabot.projects import FILES as PROJECT_FILES, LOCK as PROJECT_LOCK, PROJECT_DIR, Project, ProjectError, ProjectRegistry
from sabot.registry import LOCK_NAME, Registry, RegistryError, WaveDef
from sabot.store.published import read_report
from sabot.store.db import connect
from sabot.store.judging import read_judgements
from sabot.store.landing import latest_import
from sabot.store.runs import StoredRun, read_baselines, read_runs, record_sql
from sabot.store.verdicts import read_verdicts
from sabot.trace import TraceError, parse_runresult
from sabot_assets.bundle_trust import SIGNATURE, regular_bytes, sign_bundle
from sabot_assets.waves.scoreboard_assets import conformance_label, expected_rows, footnotes, with_cell_links
from sabot_assets.waves.live_runs import run_root_beside
from sabot_assets.waves.judging import located_from_runs
from sabot_assets.waves.verdicts import verdict_rows

MANIFEST, BUNDLE_FORMAT = "manifest.json", "sabot-bundle/1"
IGNORED_FIELDS = ("wave", "dagster_run_id")  # where and when a verdict was stored, not what it says


class VerifyError(ValueError):
    """The first published number, or piece of evidence, that does not follow from the rest."""


@dataclass
class Published:
    """A wave's evidence and what was published from it, read from a store or a bundle."""

    wave: WaveDef
    runs: dict  # (operator or '', probe) -> StoredRun, every run checked against its seal
    baselines: list
    judged: dict  # (operator, probe) -> judge verdict row (prompt variant 0)
    label: str
    missing: list
    kappa: dict | None
    cells: dict  # ruleset -> published verdict rows
    boards: dict  # ruleset -> published board
    reports: dict  # ruleset -> published Markdown
    html: str | None
    where: dict = field(default_factory=dict)  # what names each published piece in an error ({v}: the ruleset)
    project: dict | None = None  # a project wave: the registration the store pinned (`pinned_registration`)


@dataclass(frozen=True)
class Verified:
    wave: str
    runs: int
    cells: int
    rulesets: tuple
    manifest_sha256: str | None = None
    signed_by: str | None = None  # the exporter's key fingerprint (an export made with a signing key)

    def line(self) -> str:
        bundle = f"; bundle manifest sha256 {self.manifest_sha256}" if self.manifest_sha256 else ""
        return (f"{self.wave}: verified: {self.runs} sealed run(s), {self.cells} cell verdict(s) under {', '.join(self.rulesets)}, "
                f"every scoreboard and report re-derived and equal{bundle}")


# -- re-deriving ----------------------------------------------------------------------------------


def first_difference(published, derived, path: str = "") -> str | None:
    """Where two JSON values first differ, as a path (None when equal)."""
    if isinstance(published, dict) and isinstance(derived, dict):
        for key in sorted(set(published) | set(derived), key=str):
            if key not in published or key not in derived:
                return f"{path}.{key} ({'only published' if key in published else 'only re-derived'})"
            found = first_difference(published[key], derived[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(published, list) and isinstance(derived, list):
        if len(published) != len(derived):
            return f"{path} ({len(published)} published, {len(derived)} re-derived)"
        return next((d for i, (a, b) in enumerate(zip(published, derived)) if (d := first_difference(a, b, f"{path}[{i}]"))), None)
    return None if published == derived else f"{path} (published {published!r}, re-derived {derived!r})"


def _json(obj):
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def rederive(registry: Registry, pub: Published) -> int:
    """Raise VerifyError at the first published verdict, board or report that its evidence and the
    registered rules do not give; return the number of cell verdicts checked."""
    wave = pub.wave
    rulesets = [load_ruleset(registry, v) for v in wave.readings]
    boards = {}
    for ruleset in rulesets:
        v = ruleset.version
        rows, acts = [], []
        for stored in pub.cells.get(v, []):
            cell = Cell(stored["operator"], Probe(stored["framework"], stored["config"], stored["task"], int(stored["seed"])))
            derived, cell_acts = verdict_rows(wave, ruleset, cell, pub.runs.get((cell.operator, cell.probe.key)), pub.runs.get(("", cell.probe.key)), "")
            diff = first_difference(_json({k: x for k, x in stored.items() if k not in IGNORED_FIELDS}),
                                    _json({k: x for k, x in derived.items() if k not in IGNORED_FIELDS and k in stored}))
            if diff:
                raise VerifyError(f"{pub.where['cells'].format(v=v)}: cell {cell.key}: {diff}")
            rows.append(stored)
            acts += cell_acts
        rows += _run_error_rows(wave, ruleset, pub, {(r["operator"], r["probe"]) for r in rows})
        # The retry tally as the store's acts table orders it (sabot.store.verdicts.retry_acts).
        retries = [(bool(a["counted"]), a["note"]) for a in sorted(acts, key=lambda a: (a["operator"], a["probe"], a["seq"]))
                   if a["act"] == "retry_with_reason"]
        board = build_board(registry, v, rows, pub.baselines, wave.operators, pub.judged, pub.label, expected_rows(wave),
                            floor=floor_rules(ruleset, rulesets), expected_cells=wave.cell_keys(), retries=retries)
        diff = first_difference(_json(pub.boards.get(v)), _json(board))
        if diff:
            raise VerifyError(f"{pub.where['board'].format(v=v)}: {diff}")
        boards[v] = with_cell_links(wave, v, _json(board))
        markdown = render_markdown(wave.name, pub.label, boards[v], pub.missing, v == wave.headline_ruleset, pub.kappa)
        if markdown != pub.reports.get(v):
            raise VerifyError(f"{pub.where['report'].format(v=v)}: {_first_line_difference(pub.reports.get(v), markdown)}")
    if pub.html is not None:
        html = render_html(wave.name, pub.label, boards, wave.headline_ruleset, pub.missing, footnotes(registry, rulesets, pub.label), pub.kappa)
        if html != pub.html:
            raise VerifyError(f"{pub.where['html']}: {_first_line_difference(pub.html, html)}")
    return sum(len(c) for c in pub.cells.values())


def _run_error_rows(wave: WaveDef, ruleset, pub: Published, scored: set) -> list[dict]:
    """As the scoreboard does: fault runs with no stored verdict that are RUN_ERROR are itemized."""
    if wave.source != "live":
        return []
    rows = []
    for (operator, probe), run in sorted(pub.runs.items()):
        if operator and (operator, probe) not in scored and run.status == "present":
            row, _ = verdict_rows(wave, ruleset, Cell(operator, Probe.parse(probe)), run, pub.runs.get(("", probe)), "")
            rows += [row] if row["excluded"] == "RUN_ERROR" else []
    return rows


def _first_line_difference(published: str | None, derived: str) -> str:
    if published is None:
        return "not published"
    for n, (a, b) in enumerate(zip(published.splitlines(), derived.splitlines()), 1):
        if a != b:
            return f"line {n} differs (published {a[:80]!r}, re-derived {b[:80]!r})"
    return f"published {len(published.splitlines())} lines, re-derived {len(derived.splitlines())}"


# -- a project's registration ---------------------------------------------------------------------
# A project wave is scored under the team's own mapping and pass criterion, registered in the project
# folder. Its lock file sits beside the mapping it freezes, so the anchor is the store's pin of the
# registration (made at `registry lock`, else at the first run): every registered file, and the lock,
# must agree with it.


def pinned_registration(con, project: Project) -> dict:
    """The store's pin of a project's registration: name, registration hash, files and their sha256."""
    has_table = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'project_registrations'").fetchall()[0][0]
    rows = con.execute("SELECT registration, files, pinned_by, pinned_at FROM project_registrations WHERE project = ?",
                       [project.name]).fetchall() if has_table else []
    if not rows:
        raise VerifyError(f"store: project {project.name} has no pinned registration, so its runs and verdicts cannot be tied to a registered mapping")
    registration, files, pinned_by, pinned_at = rows[0]
    return {"name": project.name, "registration": registration, "files": json.loads(files), "pinned_by": pinned_by, "pinned_at": str(pinned_at)}


def check_registration(project: Project, pinned: dict, where: str) -> None:
    """The project's lock and each registered file as the pin holds them; `where` names the folder in
    errors. A lock rewritten together with the mapping is named as the lock; a file edited under an
    unchanged lock is named as that file."""
    if project.name != pinned["name"]:
        raise VerifyError(f"{where}/{PROJECT_DIR}/project.json: project {project.name!r}, but the evidence is of {pinned['name']!r}")
    try:
        locked = project.locked()
    except ProjectError as exc:
        raise VerifyError(f"{where}/{PROJECT_DIR}/{PROJECT_LOCK}: {exc}") from exc
    since = f"the store pinned {{sha}} ({pinned['pinned_by']}, {pinned['pinned_at'][:16]} UTC)"
    for rel, sha in sorted(pinned["files"].items()):
        if locked.get(rel) != sha:
            raise VerifyError(f"{where}/{PROJECT_DIR}/{PROJECT_LOCK}: registers {rel} as {str(locked.get(rel, 'absent'))[:12]}, "
                              f"but {since.format(sha=sha[:12])}; its runs and verdicts belong to that registration")
        if project.shas.get(rel) != sha:
            raise VerifyError(f"{where}/{rel}: sha256 {str(project.shas.get(rel, 'absent'))[:12]}, but {since.format(sha=sha[:12])}")
    if project.registration != pinned["registration"]:
        raise VerifyError(f"{where}/{PROJECT_DIR}/{PROJECT_LOCK}: registration {project.registration[:12]}, "
                          f"but {since.format(sha=pinned['registration'][:12])}")


def check_pass_criterion(judged_by: dict[str, dict], files: dict[str, str], where: str) -> None:
    """Every run was judged by the pass criterion whose files are `files` ({path: sha256}), as its
    sealed attempt.json recorded it (`identity.code`): the code that decided `task_passed`."""
    for attempt, code in sorted(judged_by.items()):
        recorded = code.get("pass criterion") or {}
        for rel in sorted(set(recorded) | set(files)):
            if recorded.get(rel) != files.get(rel):
                raise VerifyError(f"{where}/{rel}: sha256 {str(files.get(rel, 'absent'))[:12]}, but run {attempt} was judged by "
                                  f"{str(recorded.get(rel, 'absent'))[:12]} (its sealed {runroot.META_FILE})")


def _sealed_meta(run_root: Path, source_path: str) -> str:
    """A live run's attempt.json, as sealed (`check_sealed_run` has checked the attempt's seal)."""
    return (Path(run_root) / Path(source_path).parent / runroot.META_FILE).read_text()


# -- a wave in the store --------------------------------------------------------------------------


def check_sealed_run(run_root: Path, source_path: str, source_sha256: str, record_json: str) -> None:
    """A stored live run is its sealed run file: the store's record hashes to `source_sha256`, and
    the attempt's seal (checked under the store's key) holds that hash."""
    found = seal.sha256_text(runroot.run_file_text(json.loads(record_json)))
    if found != source_sha256:
        raise VerifyError(f"store: runs.record of {source_path}: differs from the file it was ingested from (sha256 {found[:12]}, ingested {source_sha256[:12]})")
    try:
        sealed = seal.verify(run_root, Path(run_root) / Path(source_path).parent)
    except seal.SealError as exc:
        raise VerifyError(str(exc)) from exc
    if sealed.files.get(Path(source_path).name) != source_sha256:
        raise VerifyError(f"store: runs.source_sha256 of {source_path}: not the hash its seal holds")


def _check_landed(con, wave: str, rows) -> None:
    """An imported run is the landed file it was parsed from (the corpus file, stored verbatim)."""
    landed = {p: (sha, body) for p, sha, body in con.execute("SELECT rel_path, sha256, body FROM corpus_files WHERE wave = ?", [wave]).fetchall()}
    for _op, _probe, status, record, path, sha, _attempt in rows:
        if status != "present":
            continue
        if path not in landed or landed[path][0] != sha or hashlib.sha256(landed[path][1].encode()).hexdigest() != sha:
            raise VerifyError(f"store: {path}: its landed file is missing or does not hash to {sha[:12]}")
        if parse_runresult(json.loads(landed[path][1]), path) != parse_runresult(json.loads(record), path):
            raise VerifyError(f"store: runs.record of {path}: differs from its landed file")
    # fetchall: DuckDB refuses to register a frame (read_runs) beside an unfinished result
    imported = con.execute("SELECT corpus_root FROM corpus_imports WHERE wave = ? ORDER BY imported_at DESC LIMIT 1", [wave]).fetchall()
    root = Path(imported[0][0]) if imported else None
    if root is not None and root.is_dir():  # the corpus it came from is still here: it must be what was landed
        for path, (sha, _body) in sorted(landed.items()):
            source = root / path
            if source.is_file() and hashlib.sha256(source.read_bytes()).hexdigest() != sha:
                raise VerifyError(f"{source}: differs from the file landed in the store at import (sha256 {sha[:12]})")


def published_in_store(registry: Registry, store_path: Path, wave: WaveDef) -> Published:
    if not Path(store_path).is_file():
        raise VerifyError(f"store {store_path}: no such store (a bundle is verified by its directory)")
    run_root = run_root_beside(store_path)
    with connect(store_path, read_only=True) as con:
        rows = con.execute(f"SELECT operator, probe, status, {record_sql()}, source_path, source_sha256, attempt FROM runs WHERE wave = ? ORDER BY probe, operator",
                           [wave.name]).fetchall()
        if not rows:
            raise VerifyError(f"store {store_path}: wave {wave.name} has no stored runs")
        if wave.source == "live":
            for _op, _probe, status, record, path, sha, attempt in rows:
                if status == "present":
                    if attempt is None:
                        raise VerifyError(f"store: {path}: a live run that is not a sealed attempt")
                    check_sealed_run(run_root, path, sha, record)
        else:
            _check_landed(con, wave.name, rows)
        project, pinned = getattr(registry, "project", None), None
        if project is not None:
            pinned = pinned_registration(con, project)
            judged_by = {path: json.loads(_sealed_meta(run_root, path))["identity"].get("code", {})
                         for _op, _probe, status, _record, path, *_ in rows if status == "present"}
            check_pass_criterion(judged_by, project.code_hashes()["pass criterion"], project.root.name)
        runs = read_runs(con, wave.name, [(op, probe) for op, probe, *_ in rows])
        imported = latest_import(con, wave.name)
        kappa = read_report(con, wave.name, "soft", "kappa.json")
        return Published(
            wave=wave, runs=runs, baselines=read_baselines(con, wave.name),
            judged=located_from_runs({(op, probe): v for (op, probe, _), v in read_judgements(con, wave.name, variant=0).items()}, runs),
            label=conformance_label(con, wave), missing=imported["missing"] if imported else [],
            kappa=json.loads(kappa) if kappa else None,
            cells={v: read_verdicts(con, wave.name, v) for v in wave.readings},
            boards={v: json.loads(b) for v in wave.readings if (b := read_report(con, wave.name, v, "board.json"))},
            reports={v: read_report(con, wave.name, v, "md") for v in wave.readings},
            html=read_report(con, wave.name, wave.headline_ruleset, "html"),
            where={"cells": "store: cell_verdicts of ruleset {v}", "board": "store: board.json of ruleset {v}",
                   "report": "store: Markdown report of ruleset {v}", "html": "store: HTML report"},
            project=pinned,
        )


def verify_wave(registry: Registry, store_path: Path, wave_name: str) -> Verified:
    wave = _registered_wave(registry, Path(store_path), wave_name)
    pub = published_in_store(registry, Path(store_path), wave)
    cells = rederive(registry, pub)
    return Verified(wave.name, sum(r.status == "present" for r in pub.runs.values()), cells, tuple(wave.readings))


def _registered_wave(registry: Registry, store_path: Path, wave_name: str) -> WaveDef:
    """The wave, once its rules are the registered ones; a project's first against the store's pin,
    so that an edited lock is named as such rather than as the file it no longer matches."""
    project = getattr(registry, "project", None)
    if project is not None:
        if not store_path.is_file():
            raise VerifyError(f"store {store_path}: no such store (a bundle is verified by its directory)")
        with connect(store_path, read_only=True) as con:
            check_registration(project, pinned_registration(con, project), project.root.name)
    registry.require_registered()
    return registry.wave(wave_name)


# -- a bundle -------------------------------------------------------------------------------------


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, sort_keys=True, default=str) + "\n")


def export_bundle(registry: Registry, store_path: Path, wave_name: str, directory: Path, reference_ruleset: str | None = None,
                  signer=None) -> Verified:
    """Write a wave's bundle into `directory` (new or empty), after verifying the wave in the store:
    only a wave that verifies is exported. `reference_ruleset`: the ruleset of the reference
    layout's cellverdict.json files (default: the headline); every ruleset is published. `signer`:
    the Ed25519 private key that signs the manifest (`sabot.signing`; `wave export` always has one)."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise VerifyError(f"{directory}: not empty; a bundle is written into a new or empty directory")
    wave = _registered_wave(registry, Path(store_path), wave_name)
    if reference_ruleset and reference_ruleset not in wave.readings:
        raise VerifyError(f"wave {wave.name} is scored under {', '.join(wave.readings)}, not {reference_ruleset!r}")
    pub = published_in_store(registry, Path(store_path), wave)
    cells = rederive(registry, pub)
    run_root = run_root_beside(store_path)
    with connect(store_path, read_only=True) as con:
        export_wave(con, wave, reference_ruleset or wave.headline_ruleset, directory)
    _write(directory / "seals.json", _seals(registry, Path(store_path), run_root, wave, pub, directory))
    _copy_rules(registry, directory)
    _write(directory / "evidence" / "judgements.json", [v for _, v in sorted(pub.judged.items())])
    for v in wave.readings:
        _write(directory / "published" / v / "cells.json", pub.cells[v])
        _write(directory / "published" / v / "board.json", pub.boards[v])
        (directory / "published" / v / "report.md").write_text(pub.reports[v])
    (directory / "published" / "report.html").write_text(pub.html)
    absent = [[op, probe, r.source_path] for (op, probe), r in sorted(pub.runs.items()) if r.status != "present"]
    _write(directory / "published" / "wave.json", {"wave": wave.name, "label": pub.label, "missing": pub.missing, "kappa": pub.kappa, "absent": absent})
    files = {p.relative_to(directory).as_posix(): _file_sha(p) for p in sorted(directory.rglob("*")) if p.is_file()}
    _write(directory / MANIFEST, {"format": BUNDLE_FORMAT, "wave": wave.name, "headline_ruleset": wave.headline_ruleset,
                                  "rulesets": list(wave.readings), "files": files,
                                  **({"project": {**pub.project, "folder": registry.project.root.name}} if pub.project else {})})
    signed_by = sign_bundle(directory, signer) if signer is not None else None
    return Verified(wave.name, sum(r.status == "present" for r in pub.runs.values()), cells, tuple(wave.readings), _file_sha(directory / MANIFEST),
                    signed_by)


def _copy_rules(registry: Registry, directory: Path) -> None:
    """The registered data files and their lock, as on disk, under rules/; a project's registered
    files and lock under project/ (a project registry's own entries are derived from those)."""
    copies = [(registry.root / rel, directory / "rules" / rel) for rel in [*Registry(registry.root).files, LOCK_NAME]]
    project = getattr(registry, "project", None)
    if project is not None:
        # under the folder's own name: the project's rules and reports name their files by it
        folder = directory / "project" / project.root.name
        copies += [(project.root / PROJECT_DIR / name, folder / PROJECT_DIR / name) for name in (*PROJECT_FILES, PROJECT_LOCK)]
        copies += [(project.root / rel, folder / rel) for rel in project.code_hashes()["pass criterion"]]  # what decided task_passed
    for source, target in copies:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _seals(registry: Registry, con_path: Path, run_root: Path, wave: WaveDef, pub: Published, directory: Path) -> dict:
    """Per run file of the bundle, what vouches for it: a live run's attempt and its seal; an
    imported run's landed file and hash (its body is written verbatim over the re-serialized export,
    so it still hashes to what was imported)."""
    seals = {}
    with connect(con_path, read_only=True) as con:
        landed = {p: body for p, body in con.execute("SELECT rel_path, body FROM corpus_files WHERE wave = ?", [wave.name]).fetchall()}
    for (operator, probe_key), run in sorted(pub.runs.items()):
        if run.status != "present":
            continue
        ref = cell_dir(directory, f"{RUNS_DIR}/{wave.name}", Probe.parse(probe_key), operator or None) / runroot.run_file_name(operator or None)
        rel = ref.relative_to(directory).as_posix()
        if wave.source == "live":
            attempt_dir = Path(run_root) / Path(run.source_path).parent
            seals[rel] = {"attempt": run.source_path, "seal": json.loads((attempt_dir / seal.SEAL_FILE).read_text())}
            if getattr(registry, "project", None) is not None:  # its identity names the pass criterion's code that judged it
                seals[rel]["attempt_json"] = _sealed_meta(run_root, run.source_path)
        else:
            ref.write_bytes(landed[run.source_path].encode())
            seals[rel] = {"landed": run.source_path, "sha256": run.source_sha256}
    return seals


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_json(directory: Path, rel: str):
    try:
        return json.loads(regular_bytes(directory / rel))
    except (OSError, ValueError) as exc:
        raise VerifyError(f"bundle {rel}: unreadable ({exc})") from exc


def check_manifest(directory: Path) -> dict:
    """Every file of the bundle is the one the manifest lists, and nothing else is there."""
    manifest = _read_json(directory, MANIFEST)
    if manifest.get("format") != BUNDLE_FORMAT:
        raise VerifyError(f"bundle {MANIFEST}: format {manifest.get('format')!r}, expected {BUNDLE_FORMAT}")
    listed = manifest.get("files") or {}
    present = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file() or p.is_symlink()} - {MANIFEST, SIGNATURE}
    for rel in sorted(set(listed) | present):
        path = directory / rel
        if rel not in present:
            raise VerifyError(f"bundle {rel}: listed in the manifest but missing")
        if rel not in listed:
            raise VerifyError(f"bundle {rel}: not listed in the manifest")
        if path.is_symlink() or not path.is_file():
            raise VerifyError(f"bundle {rel}: not a regular file")
        if _file_sha(path) != listed[rel]:
            raise VerifyError(f"bundle {rel}: differs from the manifest (sha256 {_file_sha(path)[:12]}, listed {listed[rel][:12]})")
    return manifest


def published_in_bundle(registry: Registry, directory: Path, manifest: dict) -> Published:
    wave = registry.wave(manifest["wave"])
    seals = _read_json(directory, "seals.json")
    runs, baselines = {}, []
    for rel, entry in sorted(seals.items()):
        raw = (directory / rel).read_bytes()
        live = "seal" in entry
        sealed = entry["seal"]["files"].get(Path(rel).name) if live else entry.get("sha256")
        if hashlib.sha256(raw).hexdigest() != sealed:
            raise VerifyError(f"bundle {rel}: differs from its seal (attempt {entry['attempt']})" if live
                              else f"bundle {rel}: differs from the file landed at import ({entry.get('landed')})")
        try:
            record = parse_runresult(json.loads(raw), rel)
        except (TraceError, ValueError) as exc:
            raise VerifyError(f"bundle {rel}: {exc}") from exc
        runs[(record.operator or "", Probe(record.framework, record.config, record.task, record.seed).key)] = StoredRun(
            "present", record, entry["attempt"] if live else entry["landed"], sealed)
        if not record.operator:
            baselines.append(record)
    baselines.sort(key=lambda r: Probe(r.framework, r.config, r.task, r.seed).key)
    facts = _read_json(directory, "published/wave.json")
    for operator, probe, source_path in facts.get("absent", []):
        runs[(operator, probe)] = StoredRun("absent", None, source_path, None)
    judged = located_from_runs({(j["operator"], j["probe"]): j for j in _read_json(directory, "evidence/judgements.json")}, runs)
    return Published(
        wave=wave, runs=runs, baselines=baselines, judged=judged, label=_label_of(runs) if wave.source == "live" else wave.label,
        missing=facts["missing"], kappa=facts["kappa"],
        cells={v: _read_json(directory, f"published/{v}/cells.json") for v in wave.readings},
        boards={v: _read_json(directory, f"published/{v}/board.json") for v in wave.readings},
        reports={v: (directory / f"published/{v}/report.md").read_text() for v in wave.readings},
        html=(directory / "published/report.html").read_text(),
        where={"cells": "bundle published/{v}/cells.json", "board": "bundle published/{v}/board.json",
               "report": "bundle published/{v}/report.md", "html": "bundle published/report.html"},
    )


def _label_of(runs: dict) -> str:
    """As the store labels a live wave: from what produced each run (`sabot.provenance`)."""
    return provenance_label(kinds((r.record.extra or {}).get("endpoint") for r in runs.values() if r.record))


def verify_bundle(directory: Path) -> Verified:
    directory = Path(directory)
    manifest = check_manifest(directory)
    registry = _bundle_registry(directory, manifest)
    if "project" in manifest:
        _check_bundled_pass_criterion(directory, f"project/{manifest['project']['folder']}")
    pub = published_in_bundle(registry, directory, manifest)
    cells = rederive(registry, pub)
    return Verified(pub.wave.name, sum(r.status == "present" for r in pub.runs.values()), cells, tuple(pub.wave.readings), _file_sha(directory / MANIFEST))


def _bundle_registry(directory: Path, manifest: dict) -> Registry:
    """The bundle's rules as a registry: a project wave's registered files checked against the pin
    the manifest carries, then laid over the standard's data as the store's registry did."""
    rules = directory / "rules"
    if "project" not in manifest:
        registry = Registry(rules)
    else:
        try:
            folder = f"project/{manifest['project']['folder']}"
            if not re.fullmatch(r"project/(?!\.\.?$)[\w.-]+", folder):  # one folder of the bundle, never a path out of it
                raise ProjectError(f"folder {manifest['project']['folder']!r} is not a folder name")
            project = Project.load(directory / folder)
        except (KeyError, TypeError, ProjectError) as exc:
            raise VerifyError(f"bundle {MANIFEST}: its project is not in the bundle ({exc})") from exc
        check_registration(project, manifest["project"], f"bundle {folder}")
        registry = ProjectRegistry(project, rules)
    try:
        registry.require_registered()
    except RegistryError as exc:
        raise VerifyError(f"bundle rules: {exc}") from exc
    return registry


def _check_bundled_pass_criterion(directory: Path, folder: str) -> None:
    """Each run's attempt.json as its seal holds it, and the bundled pass criterion the one it names."""
    judged_by, recorded = {}, set()
    for rel, entry in sorted(_read_json(directory, "seals.json").items()):
        meta = entry.get("attempt_json")
        if meta is None or hashlib.sha256(meta.encode()).hexdigest() != entry["seal"]["files"].get(runroot.META_FILE):
            raise VerifyError(f"bundle seals.json: {runroot.META_FILE} of {entry.get('attempt', rel)} is missing or differs from its seal")
        judged_by[entry["attempt"]] = json.loads(meta)["identity"].get("code", {})
        recorded |= set(judged_by[entry["attempt"]].get("pass criterion") or {})
    files = {r: _file_sha(directory / folder / r) for r in sorted(recorded) if (directory / folder / r).is_file()}
    check_pass_criterion(judged_by, files, f"bundle {folder}")
