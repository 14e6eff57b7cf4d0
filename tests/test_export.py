"""Export then re-import of a wave is lossless: every field of every run comes back."""

import json

from sabot.corpus import LIMITS, scan
from sabot.corpus_export import as_import_wave, export_wave
from sabot.store.db import connect
from sabot.store.runs import read_runs
from sabot.store.verdicts import read_verdicts
from tests.conftest import CORPUS


def test_export_then_reimport_is_lossless(scored_wave2, registry, tmp_path):
    wave = registry.wave("public_wave2")
    with connect(scored_wave2.store_path, read_only=True) as con:
        written = export_wave(con, wave, "v0.2.0", tmp_path)
        keys = [
            tuple(r)
            for r in con.execute(
                "SELECT operator, probe FROM runs WHERE wave = 'public_wave2' AND status = 'present'"
            ).fetchall()
        ]
        stored = read_runs(con, "public_wave2", keys)
        verdicts = {(r["operator"], r["probe"]): r for r in read_verdicts(con, "public_wave2", "v0.2.0")}
    assert len(keys) == 163 and len(written) == 163 + 150 + 11  # runs, cell verdicts, judge verdicts

    back = scan(as_import_wave(wave), tmp_path, registry.field(LIMITS, "max_file_bytes"))
    assert back.missing == [] and len(back.not_run) == 12
    runs = {(op or "", key): f for (op, key), f in back.runs().items()}
    assert set(runs) == set(stored)
    for key, slot in stored.items():
        assert runs[key].record == slot.record, key  # every field, events and extras included
        # ...and the exported object is the reference file's object, byte-level formatting aside.
        original = CORPUS / slot.source_path
        assert json.loads(original.read_text()) == json.loads(runs[key].body), key

    cellverdicts = [f for f in back.files if f.kind == "cellverdict"]
    assert len(cellverdicts) == 150
    for f in cellverdicts:
        obj, ours = json.loads(f.body), verdicts[(f.operator, f.probe.key)]
        assert (obj["excluded"], obj["detected_hard"], obj["reacted"], obj["recovered"]) == (
            ours["excluded"],
            ours["detected_hard"],
            ours["reacted"],
            ours["recovered"],
        )

    judge_files = [f for f in back.files if f.kind.startswith("judgeverdict")]
    assert len(judge_files) == 11
    for f in judge_files:
        original = CORPUS / f.rel_path.replace("harness/runs/public_wave2/", "harness/runs/wave2/")
        assert json.loads(original.read_text()) == json.loads(f.body), f.rel_path


def test_an_imported_wave_verifies_from_its_landed_files_and_refuses_an_edited_one(scored_wave2, registry, tmp_path):
    """`sabot verify` of an imported corpus: every run is its landed file (stored verbatim at import),
    every verdict, board and report re-derives, in the store and in its bundle. A landed file edited
    in a copy of the store is named."""
    import shutil

    import pytest

    from sabot_assets.evidence import VerifyError, verify_wave
    from sabot_assets.evidence_bundle import export_bundle, verify_bundle

    verified = verify_wave(registry, scored_wave2.store_path, "public_wave2")
    assert verified.runs == 163 and verified.cells == 150 * len(registry.wave("public_wave2").readings)
    bundled = export_bundle(registry, scored_wave2.store_path, "public_wave2", tmp_path / "bundle")
    assert (
        verify_bundle(tmp_path / "bundle") == bundled
    )  # the landed bodies, verbatim: their hashes are the imported ones
    copy = tmp_path / "sabot.duckdb"
    shutil.copyfile(scored_wave2.store_path, copy)
    with connect(copy) as con:
        path = con.execute(
            "SELECT rel_path FROM corpus_files WHERE wave = 'public_wave2' AND kind = 'fault' ORDER BY rel_path LIMIT 1"
        ).fetchall()[0][0]
        con.execute("UPDATE corpus_files SET body = body || ' ' WHERE rel_path = ?", [path])  # one byte more
    with pytest.raises(VerifyError, match=rf"store: {path}: its landed file is missing or does not hash to"):
        verify_wave(registry, copy, "public_wave2")
