"""Bring your own pipeline: the examples under examples/ run as waves, offline, through the same graph.

Each example is a team's pipeline as its authors wrote it; the platform plants O1-O6 at seams it
owns (tool objects by name, the model endpoint through its proxy) and reads acts only from the
surfaces the example's registered mapping names.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import markupsafe
import pytest
from dagster_duckdb import DuckDBResource

from adapters.byo.runner import execute
from sabot.matrix import Probe
from sabot.projects import HEADLINE, LOCK, PROJECT_BOARD_NOTE, TEST_DOUBLE_NOTE, Project, ProjectRegistry
from sabot.store.db import connect
from sabot.store.runs import read_runs
from sabot.store.verdicts import read_verdicts
from sabot_assets.definitions import build_definitions
from tests.byo_examples import EXAMPLES, ROOT


@pytest.fixture(scope="module", params=EXAMPLES, ids=lambda p: p.name)
def example_wave(request, tmp_path_factory):
    """`sabot wave run <example>` as the README gives it: six operators x three seeds + three
    baselines, offline, into a store and Dagster instance of its own."""
    tmp = tmp_path_factory.mktemp(request.param.name)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sabot"), "wave", "run", str(request.param.relative_to(ROOT))],
        cwd=ROOT,
        env={**env, "SABOT_VAR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    registry = ProjectRegistry.from_dir(request.param)
    wave = registry.wave(registry.project.name)
    with connect(tmp / "sabot.duckdb", read_only=True) as con:
        runs = read_runs(con, wave.name, [(op, p.key) for op in ("", *wave.operators) for p in wave.probes()])
        verdicts = read_verdicts(con, wave.name, wave.headline_ruleset)
    # The written reports (the `cells/` folder beside them holds the pages a board's number links to)
    reports = {path.name: path.read_text() for path in (tmp / "reports" / wave.name).iterdir() if path.is_file()}
    yield registry.project, done.stdout, runs, verdicts, reports, tmp / "sabot.duckdb"


def test_every_framework_has_an_example():
    assert sorted(Project.load(p).framework for p in EXAMPLES) == ["agent_framework", "autogen", "crewai", "langgraph"]


def test_every_operator_lands_or_is_excluded_with_its_reason(example_wave):
    project, stdout, runs, verdicts, _, _ = example_wave
    assert (
        HEADLINE == "v0.2.1" and f"{project.name} under ruleset v0.2.1 (simulation)" in stdout
    )  # new data: the standard as written
    assert (
        f"{project.name}: baselines (no fault; a cell is scored only where its baseline passed): passed for seeds 1, 2, 3"
        in stdout
    )
    for op in project.operator_ids:
        assert f"  {op} ({project.operators[op]['seam']} seam, persists): landed" in stdout
    assert set(project.operator_ids) == {f"O{i}" for i in range(1, 7)} and len(project.seeds) == 3
    faults = {k: r.record for k, r in runs.items() if k[0]}
    assert len(faults) == 18 and all(r.error is None for r in faults.values())
    baselines = [r.record for k, r in runs.items() if not k[0]]
    assert len(baselines) == 3 and all(b.task_passed for b in baselines)
    by_cell = {(v["operator"], v["probe"]): v for v in verdicts}
    for key, record in faults.items():
        injection = record.extra["injection"]
        assert injection["duration"] == "persists"  # how long the fault acted, in the cell's evidence
        if record.injection_verified:
            assert (
                injection["landed"]
                and injection["evidence"]
                and injection["acted"] >= 1
                and record.injection_seq is not None
            )
            assert by_cell[key]["status"] == "valid"
        else:
            assert injection["why_not"], f"{key}: unlanded without a reason"
            assert by_cell[key]["excluded"] == "INJECTION_UNVERIFIED"
    assert {r["status"] for r in verdicts} <= {"valid", "excluded"}


def test_landing_is_verified_from_what_reached_the_pipeline(example_wave):
    project, _, runs, _, _, _ = example_wave
    for (op, _probe), stored in runs.items():
        if not op or not stored.record.injection_verified:
            continue
        spec, record = project.operators[op], stored.record
        injected = [e for e in record.events if e.payload.get("injected")]
        assert injected and injected[0].seq == record.injection_seq
        if spec["seam"] == "model" and "model" in spec:  # O4: the endpoint said the weaker model served the agent
            assert spec["model"] in record.served_model_ids()
        elif spec["seam"] == "model":  # the altered text is in a request the model actually answered
            sent = [x for x in record.extra["exchanges"] if x["agent"] == spec["agent"] and x["status"] == 200]
            assert any(spec["replace"] in str(m.get("content")) for x in sent for m in x["request"]["messages"])
        elif "claim" in spec:  # the tool object returned the claim and its work never ran
            assert injected[0].payload["output"] == spec["claim"]
        else:
            assert injected[0].payload["tool"] == spec["tool"]


def test_acts_come_only_from_the_surfaces_the_mapping_names(example_wave):
    project, _, runs, _, _, _ = example_wave
    named = {(i, s["surface"], s["act"]) for i, s in enumerate(project.mapping["surfaces"])}
    acts = [e for r in runs.values() for e in r.record.events if e.kind == "guardrail-event"]
    assert acts, "the example's checks never fired: the test would show nothing"
    assert {(e.payload["mapping_entry"], e.payload["surface"], e.payload["act"]) for e in acts} <= named


def test_a_mapping_without_a_surface_reads_no_act_from_it(example_wave, tmp_path):
    """The same run under the registered mapping and under one with its first surface struck."""
    project, _, runs, _, _, _ = example_wave
    key = next(
        k
        for k, r in sorted(runs.items())
        if k[0] and any(e.payload.get("mapping_entry") == 0 for e in r.record.events if e.kind == "guardrail-event")
    )
    seed = Probe.parse(key[1]).seed
    full = execute(project, key[0], seed, "full", tmp_path / "full")
    struck = Project(
        project.root,
        project.doc,
        {**project.mapping, "surfaces": project.mapping["surfaces"][1:]},
        project.operators,
        project.shas,
    )
    fewer = execute(struck, key[0], seed, "struck", tmp_path / "struck")
    entry0 = project.mapping["surfaces"][0]
    assert any(
        e.payload.get("surface") == entry0["surface"] and e.payload["act"] == entry0["act"]
        for e in full.events
        if e.kind == "guardrail-event"
    )
    assert not any(
        e.payload.get("surface") == entry0["surface"] and e.payload["act"] == entry0["act"]
        for e in fewer.events
        if e.kind == "guardrail-event"
    )


def test_a_project_board_prints_no_cross_framework_reading_and_no_instrument_check(example_wave):
    """One team's pipeline against its own double: no median, band or Sabot Score, and no instrument
    check (a team's double keeps no intent log): the board says what the double is for instead."""
    project, stdout, _, _, reports, _ = example_wave
    board = stdout[stdout.index(f"{project.name} under ruleset") :]
    for text in (board, reports[f"{HEADLINE}.md"], reports["index.html"]):
        for forbidden in (
            "Median",
            "median",
            "band:",
            "Sabot Score",
            "Instrument check",
            "disagreements",
            "intent log False",
        ):
            assert forbidden not in text
    assert TEST_DOUBLE_NOTE in stdout and PROJECT_BOARD_NOTE in stdout
    assert (
        TEST_DOUBLE_NOTE in reports[f"{HEADLINE}.md"]
        and str(markupsafe.escape(PROJECT_BOARD_NOTE)) in reports["index.html"]
    )


def test_a_project_board_against_a_provider_draws_no_median_either():
    """Against a provider the label is no longer simulation, and still a project is one pipeline."""
    from judges.hard.scoreboard import median_entry
    from sabot_assets.export import scoreboard_text

    registry = ProjectRegistry.from_dir(EXAMPLES[0])
    entry = median_entry(registry, [], "derived", [f"{registry.project.framework}/own"])
    assert (entry["value"], entry["band"], entry["withheld"]) == (None, None, PROJECT_BOARD_NOTE)
    board = {
        "project": registry.project.name,
        "cells": {"excluded": 1},
        "median": entry,
        "exclusions": [[registry.project.framework, "own", registry.project.task_id, "O1", "RUN_ERROR", 1]],
    }
    text = scoreboard_text(
        {"wave": registry.project.name, "ruleset": HEADLINE, "label": "derived", "missing": [], "scoreboard": board}
    )
    assert "edian" not in text and "band" not in text and "Sabot Score" not in text and TEST_DOUBLE_NOTE not in text
    assert PROJECT_BOARD_NOTE in text and "Excluded cells: RUN_ERROR 1 (O1 1)" in text


def store_rows(store_path) -> dict[str, int]:
    with connect(store_path, read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


def refusal(registry, store_path, instance, asset: str) -> str:
    """Materialize one asset of the project's wave as the UI would; the step failure's text."""
    defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
    key = dg.AssetKey([registry.project.name, asset])
    partitions = defs.resolve_assets_def(key).partitions_def
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        asset_selection=[key],
        partition_key=partitions.get_partition_keys()[0] if partitions else None,
        instance=instance,
        raise_on_error=False,
    )
    failure = next(e for e in result.all_events if e.is_step_failure)
    return failure.step_failure_data.user_failure_data.description


def test_a_lock_file_edited_with_the_mapping_is_caught_by_the_store(example_wave, tmp_path):
    """The folder's lock can be rewritten with the mapping; the store's pin, made when the store first
    met the project, cannot: its stored runs and verdicts are never re-scored under the new mapping."""
    project, _, _, verdicts, _, store_path = example_wave
    copy = tmp_path / project.root.name
    shutil.copytree(project.root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    mapping = copy / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    doc["surfaces"] = doc["surfaces"][1:]  # strike a surface after seeing the data...
    mapping.write_text(json.dumps(doc, indent=1))
    (copy / "sabot" / LOCK).unlink()  # ...and register the edit as if it had always been so
    Project.load(copy).write_lock()
    edited = ProjectRegistry.from_dir(copy)
    assert edited.lock_problems() == []  # the folder alone no longer shows the edit
    before = store_rows(store_path)
    with dg.instance_for_test() as instance:
        for asset in ("cell_verdicts", "scoreboard", "fault_runs"):
            why = refusal(edited, store_path, instance, asset)
            assert (
                f"{copy.name}/sabot/{LOCK}: project {project.name} is registered as" in why
                and "this store pinned it" in why
            )
    assert store_rows(store_path) == before
    with connect(store_path, read_only=True) as con:
        assert read_verdicts(con, project.name, HEADLINE) == verdicts
    env = {**os.environ, "SABOT_DB": str(store_path)}
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sabot"), "registry", "lock", str(copy)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and f"sabot/{LOCK}" in done.stderr and "pinned" in done.stderr
    # A store holding the project's runs with no pin at all cannot tie them to a registration either.
    unpinned = tmp_path / "unpinned.duckdb"
    shutil.copyfile(store_path, unpinned)
    with connect(unpinned) as con:
        con.execute("DELETE FROM project_registrations")
    with dg.instance_for_test() as instance:
        assert "but no pinned registration" in refusal(
            ProjectRegistry.from_dir(project.root), unpinned, instance, "cell_verdicts"
        )


def _rehash_manifest(bundle: Path) -> None:
    """Rewrite a bundle's manifest over its files as they are: what a forger who edits files does."""
    import hashlib

    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"] = {rel: hashlib.sha256((bundle / rel).read_bytes()).hexdigest() for rel in manifest["files"]}
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def _edit_mapping_and_relock(folder: Path) -> None:
    mapping = folder / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    doc["surfaces"] = doc["surfaces"][1:]  # strike a surface after seeing the data, and register it anew
    mapping.write_text(json.dumps(doc, indent=1))
    (folder / "sabot" / LOCK).unlink()
    Project.load(folder).write_lock()


def test_a_project_wave_verifies_and_exports_with_its_registration(example_wave, tmp_path):
    """`sabot verify DIR` and `sabot wave export DIR` of a project: its registered mapping, project and
    operators files, the store's pin of their registration and the pass criterion that judged the runs
    are evidence; the bundle verifies in a fresh directory with no store; an edited mapping, lock or
    pass criterion, in the folder or the bundle, is named."""
    from sabot_assets.evidence import VerifyError, verify_wave
    from sabot_assets.evidence_bundle import verify_bundle

    project, _, runs, _, _, store_path = example_wave
    present = sum(r.status == "present" for r in runs.values())
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    sabot = lambda *args, var=store_path.parent: subprocess.run(
        [str(ROOT / ".venv" / "bin" / "sabot"), *args],
        cwd=ROOT,  # noqa: E731
        env={**env, "SABOT_VAR": str(var)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    done = sabot("verify", str(project.root))
    assert done.returncode == 0 and f"{project.name}: verified: {present} sealed run(s)" in done.stdout, (
        done.stdout + done.stderr
    )
    bundle = tmp_path / "bundle"
    done = sabot("wave", "export", str(project.root), str(bundle))
    assert done.returncode == 0, done.stderr
    pinned = json.loads((bundle / "manifest.json").read_text())["project"]
    assert pinned["registration"] == project.registration and pinned["files"] == project.shas
    folder = bundle / "project" / project.root.name
    assert (folder / "sabot" / "mapping.json").read_bytes() == (project.root / "sabot" / "mapping.json").read_bytes()
    done = sabot("verify", str(bundle), var=tmp_path / "elsewhere")  # another machine: no store, no key, no model
    assert done.returncode == 0 and f"{project.name}: verified: {present} sealed run(s)" in done.stdout, (
        done.stdout + done.stderr
    )

    # In the store: a mapping edited alone is named; edited and registered anew, the lock is named.
    copy = tmp_path / "folder" / project.root.name
    shutil.copytree(project.root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    mapping = copy / "sabot" / "mapping.json"
    mapping.write_text(mapping.read_text().replace('"surfaces"', '"surfaces" ', 1))
    with pytest.raises(VerifyError, match=f"^{copy.name}/sabot/mapping.json: sha256 .* but the store pinned"):
        verify_wave(ProjectRegistry.from_dir(copy), store_path, project.name)
    _edit_mapping_and_relock(copy)
    with pytest.raises(
        VerifyError, match=f"^{copy.name}/sabot/{LOCK}: registers sabot/mapping.json as .* but the store pinned"
    ):
        verify_wave(ProjectRegistry.from_dir(copy), store_path, project.name)

    # The pass criterion that judged every run (as each sealed attempt recorded it) is evidence too.
    judged = tmp_path / "judged" / project.root.name
    shutil.copytree(project.root, judged, ignore=shutil.ignore_patterns("__pycache__"))
    check = next(iter(project.code_hashes()["pass criterion"]))
    (judged / check).write_text((judged / check).read_text() + "\n# edited after the wave\n")
    with pytest.raises(VerifyError, match=f"^{judged.name}/{check}: sha256 .* but run .* was judged by"):
        verify_wave(ProjectRegistry.from_dir(judged), store_path, project.name)
    original = (folder / check).read_bytes()
    (folder / check).write_bytes(original + b"\n# edited after the wave\n")
    _rehash_manifest(bundle)
    with pytest.raises(
        VerifyError, match=f"bundle project/{project.root.name}/{check}: sha256 .* but run .* was judged by"
    ):
        verify_bundle(bundle)
    (folder / check).write_bytes(original)
    _rehash_manifest(bundle)

    # In the bundle: one edited byte is named by the manifest; with the manifest rewritten over the
    # edited mapping and its new lock, the pinned registration it carries names the lock.
    text = (folder / "sabot" / "mapping.json").read_bytes()
    (folder / "sabot" / "mapping.json").write_bytes(text.replace(b'"surfaces"', b'"surfaces" ', 1))
    with pytest.raises(
        VerifyError, match=f"bundle project/{project.root.name}/sabot/mapping.json: differs from the manifest"
    ):
        verify_bundle(bundle)
    (folder / "sabot" / "mapping.json").write_bytes(text)
    _edit_mapping_and_relock(folder)
    _rehash_manifest(bundle)
    with pytest.raises(
        VerifyError, match=f"bundle project/{project.root.name}/sabot/{LOCK}: registers sabot/mapping.json"
    ):
        verify_bundle(bundle)
