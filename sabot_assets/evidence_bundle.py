"""`sabot wave export`'s bundle, and `sabot verify` of one: a published wave carried to another
machine with everything its numbers are re-derived from there (`sabot_assets.evidence`), with no
model call and no store.

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
from pathlib import Path

from sabot import runroot, seal
from sabot.corpus_export import RUNS_DIR, cell_dir, export_wave
from sabot.matrix import Probe
from sabot.provenance import kinds, provenance_label
from sabot.project_registry import ProjectRegistry
from sabot.projects import (
    FILES as PROJECT_FILES,
    LOCK as PROJECT_LOCK,
    PROJECT_DIR,
    Project,
    ProjectError,
)
from sabot.registry import LOCK_NAME, Registry, RegistryError, WaveDef
from sabot.store.db import connect
from sabot.store.runs import StoredRun
from sabot.trace import TraceError, parse_runresult
from sabot_assets.bundle_trust import SIGNATURE, regular_bytes, sign_bundle
from sabot_assets.evidence import (
    Published,
    Verified,
    VerifyError,
    check_pass_criterion,
    check_registration,
    published_in_store,
    registered_wave,
    rederive,
    sealed_meta,
)
from sabot_assets.waves.attempts import run_root_beside
from sabot_assets.waves.judging import located_from_runs

MANIFEST, BUNDLE_FORMAT = "manifest.json", "sabot-bundle/1"


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, sort_keys=True, default=str) + "\n")


def export_bundle(
    registry: Registry,
    store_path: Path,
    wave_name: str,
    directory: Path,
    reference_ruleset: str | None = None,
    signer=None,
) -> Verified:
    """Write a wave's bundle into `directory` (new or empty), after verifying the wave in the store:
    only a wave that verifies is exported. `reference_ruleset`: the ruleset of the reference
    layout's cellverdict.json files (default: the headline); every ruleset is published. `signer`:
    the Ed25519 private key that signs the manifest (`sabot.signing`; `wave export` always has one)."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise VerifyError(f"{directory}: not empty; a bundle is written into a new or empty directory")
    wave = registered_wave(registry, Path(store_path), wave_name)
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
    _write(
        directory / "published" / "wave.json",
        {"wave": wave.name, "label": pub.label, "missing": pub.missing, "kappa": pub.kappa, "absent": absent},
    )
    files = {p.relative_to(directory).as_posix(): _file_sha(p) for p in sorted(directory.rglob("*")) if p.is_file()}
    _write(
        directory / MANIFEST,
        {
            "format": BUNDLE_FORMAT,
            "wave": wave.name,
            "headline_ruleset": wave.headline_ruleset,
            "rulesets": list(wave.readings),
            "files": files,
            **({"project": {**pub.project, "folder": registry.project.root.name}} if pub.project else {}),
        },
    )
    signed_by = sign_bundle(directory, signer) if signer is not None else None
    return Verified(
        wave.name,
        sum(r.status == "present" for r in pub.runs.values()),
        cells,
        tuple(wave.readings),
        _file_sha(directory / MANIFEST),
        signed_by,
    )


def _copy_rules(registry: Registry, directory: Path) -> None:
    """The registered data files and their lock, as on disk, under rules/; a project's registered
    files and lock under project/ (a project registry's own entries are derived from those)."""
    copies = [(registry.root / rel, directory / "rules" / rel) for rel in [*Registry(registry.root).files, LOCK_NAME]]
    project = getattr(registry, "project", None)
    if project is not None:
        # under the folder's own name: the project's rules and reports name their files by it
        folder = directory / "project" / project.root.name
        copies += [
            (project.root / PROJECT_DIR / name, folder / PROJECT_DIR / name) for name in (*PROJECT_FILES, PROJECT_LOCK)
        ]
        copies += [
            (project.root / rel, folder / rel) for rel in project.code_hashes()["pass criterion"]
        ]  # what decided task_passed
    for source, target in copies:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _seals(registry: Registry, con_path: Path, run_root: Path, wave: WaveDef, pub: Published, directory: Path) -> dict:
    """Per run file of the bundle, what vouches for it: a live run's attempt and its seal; an
    imported run's landed file and hash (its body is written verbatim over the re-serialized export,
    so it still hashes to what was imported)."""
    seals = {}
    with connect(con_path, read_only=True) as con:
        landed = {
            p: body
            for p, body in con.execute("SELECT rel_path, body FROM corpus_files WHERE wave = ?", [wave.name]).fetchall()
        }
    for (operator, probe_key), run in sorted(pub.runs.items()):
        if run.status != "present":
            continue
        ref = cell_dir(
            directory, f"{RUNS_DIR}/{wave.name}", Probe.parse(probe_key), operator or None
        ) / runroot.run_file_name(operator or None)
        rel = ref.relative_to(directory).as_posix()
        if wave.source == "live":
            attempt_dir = Path(run_root) / Path(run.source_path).parent
            seals[rel] = {"attempt": run.source_path, "seal": json.loads((attempt_dir / seal.SEAL_FILE).read_text())}
            if (
                getattr(registry, "project", None) is not None
            ):  # its identity names the pass criterion's code that judged it
                seals[rel]["attempt_json"] = sealed_meta(run_root, run.source_path)
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
    present = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file() or p.is_symlink()} - {
        MANIFEST,
        SIGNATURE,
    }
    for rel in sorted(set(listed) | present):
        path = directory / rel
        if rel not in present:
            raise VerifyError(f"bundle {rel}: listed in the manifest but missing")
        if rel not in listed:
            raise VerifyError(f"bundle {rel}: not listed in the manifest")
        if path.is_symlink() or not path.is_file():
            raise VerifyError(f"bundle {rel}: not a regular file")
        if _file_sha(path) != listed[rel]:
            raise VerifyError(
                f"bundle {rel}: differs from the manifest (sha256 {_file_sha(path)[:12]}, listed {listed[rel][:12]})"
            )
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
            raise VerifyError(
                f"bundle {rel}: differs from its seal (attempt {entry['attempt']})"
                if live
                else f"bundle {rel}: differs from the file landed at import ({entry.get('landed')})"
            )
        try:
            record = parse_runresult(json.loads(raw), rel)
        except (TraceError, ValueError) as exc:
            raise VerifyError(f"bundle {rel}: {exc}") from exc
        runs[(record.operator or "", Probe(record.framework, record.config, record.task, record.seed).key)] = StoredRun(
            "present", record, entry["attempt"] if live else entry["landed"], sealed
        )
        if not record.operator:
            baselines.append(record)
    baselines.sort(key=lambda r: Probe(r.framework, r.config, r.task, r.seed).key)
    facts = _read_json(directory, "published/wave.json")
    for operator, probe, source_path in facts.get("absent", []):
        runs[(operator, probe)] = StoredRun("absent", None, source_path, None)
    judged = located_from_runs(
        {(j["operator"], j["probe"]): j for j in _read_json(directory, "evidence/judgements.json")}, runs
    )
    return Published(
        wave=wave,
        runs=runs,
        baselines=baselines,
        judged=judged,
        label=_label_of(runs) if wave.source == "live" else wave.label,
        missing=facts["missing"],
        kappa=facts["kappa"],
        cells={v: _read_json(directory, f"published/{v}/cells.json") for v in wave.readings},
        boards={v: _read_json(directory, f"published/{v}/board.json") for v in wave.readings},
        reports={v: (directory / f"published/{v}/report.md").read_text() for v in wave.readings},
        html=(directory / "published/report.html").read_text(),
        where={
            "cells": "bundle published/{v}/cells.json",
            "board": "bundle published/{v}/board.json",
            "report": "bundle published/{v}/report.md",
            "html": "bundle published/report.html",
        },
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
    return Verified(
        pub.wave.name,
        sum(r.status == "present" for r in pub.runs.values()),
        cells,
        tuple(pub.wave.readings),
        _file_sha(directory / MANIFEST),
    )


def _bundle_registry(directory: Path, manifest: dict) -> Registry:
    """The bundle's rules as a registry: a project wave's registered files checked against the pin
    the manifest carries, then laid over the standard's data as the store's registry did."""
    rules = directory / "rules"
    if "project" not in manifest:
        registry = Registry(rules)
    else:
        try:
            folder = f"project/{manifest['project']['folder']}"
            if not re.fullmatch(
                r"project/(?!\.\.?$)[\w.-]+", folder
            ):  # one folder of the bundle, never a path out of it
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
            raise VerifyError(
                f"bundle seals.json: {runroot.META_FILE} of {entry.get('attempt', rel)} is missing or differs from its seal"
            )
        judged_by[entry["attempt"]] = json.loads(meta)["identity"].get("code", {})
        recorded |= set(judged_by[entry["attempt"]].get("pass criterion") or {})
    files = {r: _file_sha(directory / folder / r) for r in sorted(recorded) if (directory / folder / r).is_file()}
    check_pass_criterion(judged_by, files, f"bundle {folder}")
