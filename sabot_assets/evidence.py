"""`sabot verify`: every published number of a wave re-derived from its sealed evidence and the
registered rules, and compared with what the store (or a bundle) says, with no model call.

What is re-derived: each scored run checked against its seal; each cell verdict, under every
ruleset the wave reads, from those runs (`judges.hard`); each scoreboard from those verdicts, the
clean baselines and the stored judge verdicts (the soft tier's rulings are evidence here, as a model
call cannot be repeated offline); each Markdown report and the HTML page from those boards. The
first difference raises VerifyError naming what differs and where.

A bundle (`sabot_assets.evidence_bundle`) carries a published wave to another machine, where
`verify_bundle` re-derives it the same way.
"""

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from judges.hard.scoreboard import build_board
from judges.hard.report import render_markdown
from judges.hard.rulesets import load_ruleset
from judges.hard.strict import floor_rules
from judges.report.html import render_html
from sabot import runroot, seal
from sabot.matrix import Cell, Probe
from sabot.projects import LOCK as PROJECT_LOCK, PROJECT_DIR, Project, ProjectError
from sabot.registry import Registry, WaveDef
from sabot.store.published import read_report
from sabot.store.db import connect
from sabot.store.judging import read_judgements
from sabot.store.landing import latest_import
from sabot.store.runs import read_baselines, read_runs, record_sql
from sabot.store.scored import scored_column, scored_fields
from sabot.store.verdicts import read_verdicts
from sabot.trace import parse_runresult
from sabot_assets.waves.scoreboard_assets import conformance_label, expected_rows, footnotes, with_cell_links
from sabot_assets.waves.attempts import run_root_beside
from sabot_assets.waves.judging import located_from_runs
from sabot_assets.waves.verdicts import verdict_rows

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
        return (
            f"{self.wave}: verified: {self.runs} sealed run(s), {self.cells} cell verdict(s) under {', '.join(self.rulesets)}, "
            f"every scoreboard and report re-derived and equal{bundle}"
        )


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
        return next(
            (d for i, (a, b) in enumerate(zip(published, derived)) if (d := first_difference(a, b, f"{path}[{i}]"))),
            None,
        )
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
            cell = Cell(
                stored["operator"], Probe(stored["framework"], stored["config"], stored["task"], int(stored["seed"]))
            )
            derived, cell_acts = verdict_rows(
                wave,
                ruleset,
                cell,
                pub.runs.get((cell.operator, cell.probe.key)),
                pub.runs.get(("", cell.probe.key)),
                "",
            )
            diff = first_difference(
                _json({k: x for k, x in stored.items() if k not in IGNORED_FIELDS}),
                _json({k: x for k, x in derived.items() if k not in IGNORED_FIELDS and k in stored}),
            )
            if diff:
                raise VerifyError(f"{pub.where['cells'].format(v=v)}: cell {cell.key}: {diff}")
            rows.append(stored)
            acts += cell_acts
        rows += _run_error_rows(wave, ruleset, pub, {(r["operator"], r["probe"]) for r in rows})
        # The retry tally as the store's acts table orders it (sabot.store.verdicts.retry_acts).
        retries = [
            (bool(a["counted"]), a["note"])
            for a in sorted(acts, key=lambda a: (a["operator"], a["probe"], a["seq"]))
            if a["act"] == "retry_with_reason"
        ]
        board = build_board(
            registry,
            v,
            rows,
            pub.baselines,
            wave.operators,
            pub.judged,
            pub.label,
            expected_rows(wave),
            floor=floor_rules(ruleset, rulesets),
            expected_cells=wave.cell_keys(),
            retries=retries,
        )
        diff = first_difference(_json(pub.boards.get(v)), _json(board))
        if diff:
            raise VerifyError(f"{pub.where['board'].format(v=v)}: {diff}")
        boards[v] = with_cell_links(wave, v, _json(board))
        markdown = render_markdown(wave.name, pub.label, boards[v], pub.missing, v == wave.headline_ruleset, pub.kappa)
        if markdown != pub.reports.get(v):
            raise VerifyError(
                f"{pub.where['report'].format(v=v)}: {_first_line_difference(pub.reports.get(v), markdown)}"
            )
    if pub.html is not None:
        html = render_html(
            wave.name,
            pub.label,
            boards,
            wave.headline_ruleset,
            pub.missing,
            footnotes(registry, rulesets, pub.label),
            pub.kappa,
        )
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
    has_table = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'project_registrations'"
    ).fetchall()[0][0]
    rows = (
        con.execute(
            "SELECT registration, files, pinned_by, pinned_at FROM project_registrations WHERE project = ?",
            [project.name],
        ).fetchall()
        if has_table
        else []
    )
    if not rows:
        raise VerifyError(
            f"store: project {project.name} has no pinned registration, so its runs and verdicts cannot be tied to a registered mapping"
        )
    registration, files, pinned_by, pinned_at = rows[0]
    return {
        "name": project.name,
        "registration": registration,
        "files": json.loads(files),
        "pinned_by": pinned_by,
        "pinned_at": str(pinned_at),
    }


def check_registration(project: Project, pinned: dict, where: str) -> None:
    """The project's lock and each registered file as the pin holds them; `where` names the folder in
    errors. A lock rewritten together with the mapping is named as the lock; a file edited under an
    unchanged lock is named as that file."""
    if project.name != pinned["name"]:
        raise VerifyError(
            f"{where}/{PROJECT_DIR}/project.json: project {project.name!r}, but the evidence is of {pinned['name']!r}"
        )
    try:
        locked = project.locked()
    except ProjectError as exc:
        raise VerifyError(f"{where}/{PROJECT_DIR}/{PROJECT_LOCK}: {exc}") from exc
    since = f"the store pinned {{sha}} ({pinned['pinned_by']}, {pinned['pinned_at'][:16]} UTC)"
    for rel, sha in sorted(pinned["files"].items()):
        if locked.get(rel) != sha:
            raise VerifyError(
                f"{where}/{PROJECT_DIR}/{PROJECT_LOCK}: registers {rel} as {str(locked.get(rel, 'absent'))[:12]}, "
                f"but {since.format(sha=sha[:12])}; its runs and verdicts belong to that registration"
            )
        if project.shas.get(rel) != sha:
            raise VerifyError(
                f"{where}/{rel}: sha256 {str(project.shas.get(rel, 'absent'))[:12]}, but {since.format(sha=sha[:12])}"
            )
    if project.registration != pinned["registration"]:
        raise VerifyError(
            f"{where}/{PROJECT_DIR}/{PROJECT_LOCK}: registration {project.registration[:12]}, "
            f"but {since.format(sha=pinned['registration'][:12])}"
        )


def check_pass_criterion(judged_by: dict[str, dict], files: dict[str, str], where: str) -> None:
    """Every run was judged by the pass criterion whose files are `files` ({path: sha256}), as its
    sealed attempt.json recorded it (`identity.code`): the code that decided `task_passed`."""
    for attempt, code in sorted(judged_by.items()):
        recorded = code.get("pass criterion") or {}
        for rel in sorted(set(recorded) | set(files)):
            if recorded.get(rel) != files.get(rel):
                raise VerifyError(
                    f"{where}/{rel}: sha256 {str(files.get(rel, 'absent'))[:12]}, but run {attempt} was judged by "
                    f"{str(recorded.get(rel, 'absent'))[:12]} (its sealed {runroot.META_FILE})"
                )


def sealed_meta(run_root: Path, source_path: str) -> str:
    """A live run's attempt.json, as sealed (`check_sealed_run` has checked the attempt's seal)."""
    return (Path(run_root) / Path(source_path).parent / runroot.META_FILE).read_text()


# -- a wave in the store --------------------------------------------------------------------------


def check_sealed_run(run_root: Path, source_path: str, source_sha256: str, record_json: str) -> None:
    """A stored live run is its sealed run file: the store's record hashes to `source_sha256`, and
    the attempt's seal (checked under the store's key) holds that hash."""
    found = seal.sha256_text(runroot.run_file_text(json.loads(record_json)))
    if found != source_sha256:
        raise VerifyError(
            f"store: runs.record of {source_path}: differs from the file it was ingested from (sha256 {found[:12]}, ingested {source_sha256[:12]})"
        )
    try:
        sealed = seal.verify(run_root, Path(run_root) / Path(source_path).parent)
    except seal.SealError as exc:
        raise VerifyError(str(exc)) from exc
    if sealed.files.get(Path(source_path).name) != source_sha256:
        raise VerifyError(f"store: runs.source_sha256 of {source_path}: not the hash its seal holds")


def check_scored_fields(source_path: str, record_json: str | None, scored_json: str | None) -> None:
    """The fields the scorer reads (`runs.scored`, `sabot.store.runs.read_scored_runs`) are the record's own."""
    if scored_json is None:
        return
    if json.loads(scored_json) != scored_fields(json.loads(record_json) if record_json else {}):
        raise VerifyError(f"store: runs.scored of {source_path}: not the fields of its record (what the scorer reads)")


def _check_landed(con, wave: str, rows) -> None:
    """An imported run is the landed file it was parsed from (the corpus file, stored verbatim)."""
    landed = {
        p: (sha, body)
        for p, sha, body in con.execute(
            "SELECT rel_path, sha256, body FROM corpus_files WHERE wave = ?", [wave]
        ).fetchall()
    }
    for _op, _probe, status, record, path, sha, *_ in rows:
        if status != "present":
            continue
        if path not in landed or landed[path][0] != sha or hashlib.sha256(landed[path][1].encode()).hexdigest() != sha:
            raise VerifyError(f"store: {path}: its landed file is missing or does not hash to {sha[:12]}")
        if parse_runresult(json.loads(landed[path][1]), path) != parse_runresult(json.loads(record), path):
            raise VerifyError(f"store: runs.record of {path}: differs from its landed file")
    # fetchall: DuckDB refuses to register a frame (read_runs) beside an unfinished result
    imported = con.execute(
        "SELECT corpus_root FROM corpus_imports WHERE wave = ? ORDER BY imported_at DESC LIMIT 1", [wave]
    ).fetchall()
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
        rows = con.execute(
            f"SELECT operator, probe, status, {record_sql()}, source_path, source_sha256, attempt, "
            f"{scored_column(con, 'runs')}::VARCHAR FROM runs WHERE wave = ? ORDER BY probe, operator",
            [wave.name],
        ).fetchall()
        if not rows:
            raise VerifyError(f"store {store_path}: wave {wave.name} has no stored runs")
        for *_, record, path, _sha, _attempt, scored in rows:
            check_scored_fields(path, record, scored)
        if wave.source == "live":
            for _op, _probe, status, record, path, sha, attempt, _scored in rows:
                if status == "present":
                    if attempt is None:
                        raise VerifyError(f"store: {path}: a live run that is not a sealed attempt")
                    check_sealed_run(run_root, path, sha, record)
        else:
            _check_landed(con, wave.name, rows)
        project, pinned = getattr(registry, "project", None), None
        if project is not None:
            pinned = pinned_registration(con, project)
            judged_by = {
                path: json.loads(sealed_meta(run_root, path))["identity"].get("code", {})
                for _op, _probe, status, _record, path, *_ in rows
                if status == "present"
            }
            check_pass_criterion(judged_by, project.code_hashes()["pass criterion"], project.root.name)
        runs = read_runs(con, wave.name, [(op, probe) for op, probe, *_ in rows])
        imported = latest_import(con, wave.name)
        kappa = read_report(con, wave.name, "soft", "kappa.json")
        return Published(
            wave=wave,
            runs=runs,
            baselines=read_baselines(con, wave.name),
            judged=located_from_runs(
                {(op, probe): v for (op, probe, _), v in read_judgements(con, wave.name, variant=0).items()}, runs
            ),
            label=conformance_label(con, wave),
            missing=imported["missing"] if imported else [],
            kappa=json.loads(kappa) if kappa else None,
            cells={v: read_verdicts(con, wave.name, v) for v in wave.readings},
            boards={v: json.loads(b) for v in wave.readings if (b := read_report(con, wave.name, v, "board.json"))},
            reports={v: read_report(con, wave.name, v, "md") for v in wave.readings},
            html=read_report(con, wave.name, wave.headline_ruleset, "html"),
            where={
                "cells": "store: cell_verdicts of ruleset {v}",
                "board": "store: board.json of ruleset {v}",
                "report": "store: Markdown report of ruleset {v}",
                "html": "store: HTML report",
            },
            project=pinned,
        )


def verify_wave(registry: Registry, store_path: Path, wave_name: str) -> Verified:
    wave = registered_wave(registry, Path(store_path), wave_name)
    pub = published_in_store(registry, Path(store_path), wave)
    cells = rederive(registry, pub)
    return Verified(wave.name, sum(r.status == "present" for r in pub.runs.values()), cells, tuple(wave.readings))


def registered_wave(registry: Registry, store_path: Path, wave_name: str) -> WaveDef:
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
