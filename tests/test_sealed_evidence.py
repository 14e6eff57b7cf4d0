"""Evidence is accepted only sealed and unmodified: an edited stored reply, an edited run-root
record, a hand-placed or moved attempt are each refused with a line naming the file, and none of
them changes a stored verdict. One live slice (a baseline and one fault run) is made once; each test
edits its own copy of the store and run root."""

import json
import shutil

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.store.recordings import RecordingRefused
from sabot import runroot, seal
from sabot.matrix import Probe
from sabot.store.db import connect
from sabot.store.verdicts import read_verdicts
from sabot_assets.definitions import build_definitions
from sabot_assets.evidence import VerifyError, verify_wave
from sabot_assets.materialize import MaterializationError
from sabot_assets.wave_jobs import Slice, run_wave
from sabot_assets.waves.attempts import ingest_pending, reusable_attempts

SLICE = Slice(frameworks=("langgraph",), configs=("default",), tasks=("T1",), operators=("O1",))
PROBE = Probe("langgraph", "default", "T1", 11)
FAULT_SLOT = "demo/langgraph/default/T1/O1/seed11"


def _run(registry, store_dir, replay=False):
    (store_dir / "dagster").mkdir(exist_ok=True)
    with dg.instance_for_test(temp_dir=str(store_dir / "dagster")) as instance:
        defs = build_definitions(registry, DuckDBResource(database=str(store_dir / "sabot.duckdb")))
        return run_wave(registry, defs, instance, "demo", selection=SLICE, replay=replay)


@pytest.fixture(scope="module")
def sliced(registry, tmp_path_factory):
    store_dir = tmp_path_factory.mktemp("sealed")
    result = _run(registry, store_dir)
    assert result.tally.ran == 2 and not result.tally.run_errors
    shutil.rmtree(store_dir / "dagster")
    return store_dir


@pytest.fixture
def store_copy(sliced, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(sliced, copy)
    return copy


def _verdicts(store_dir):
    with connect(store_dir / "sabot.duckdb", read_only=True) as con:
        rows = read_verdicts(con, "demo")
        attempts = con.execute("SELECT operator, probe, attempt, source_sha256 FROM attempts ORDER BY ALL").fetchall()
    return [{k: v for k, v in r.items() if k != "dagster_run_id"} for r in rows], attempts


def test_the_key_is_kept_out_of_the_run_root_and_every_finished_attempt_is_sealed(sliced, registry):
    assert (sliced / seal.KEY_FILE).is_file() and not list((sliced / "runroot").rglob(seal.KEY_FILE))
    attempts = sorted((sliced / "runroot").glob("demo/*/*/*/*/*/attempt-*"))
    assert len(attempts) == 2 and all((a / seal.SEAL_FILE).is_file() for a in attempts)
    assert verify_wave(registry, sliced / "sabot.duckdb", "demo").runs == 2


def test_a_hand_placed_attempt_is_refused_and_never_scored(store_copy, registry):
    """The forgery of the issue: attempt-9 with task_passed flipped, beside a sealed attempt-1. Both
    a copied seal and none are refused; the wave stops naming it; the verdicts stay as they were."""
    before = _verdicts(store_copy)
    slot = store_copy / "runroot" / FAULT_SLOT
    forged = slot / "attempt-9"
    shutil.copytree(slot / "attempt-1", forged)
    record = json.loads((forged / "runresult.json").read_text())
    record["task_passed"] = not record["task_passed"]
    (forged / "runresult.json").write_text(json.dumps(record))
    with pytest.raises(
        MaterializationError, match=rf"refused attempt {FAULT_SLOT}/attempt-9: runresult.json differs from its seal"
    ):
        _run(registry, store_copy)
    assert _verdicts(store_copy) == before
    (forged / seal.SEAL_FILE).unlink()  # no seal at all: refused the same way, attempt-1 still the one reused
    refused, run_root = {}, store_copy / "runroot"
    identity = runroot.read_attempt(run_root, slot / "attempt-1").identity
    assert reusable_attempts(run_root, "demo", [("O1", PROBE)], identity, refused)[("O1", PROBE)].number == 1
    assert refused == {
        str(forged): f"attempt {FAULT_SLOT}/attempt-9: not sealed (no seal.json): not accepted as evidence"
    }


def test_an_edited_run_root_record_is_refused_by_ingest_reuse_and_verify(store_copy, registry):
    run_root = store_copy / "runroot"
    path = run_root / FAULT_SLOT / "attempt-1" / "runresult.json"
    before = _verdicts(store_copy)
    record = json.loads(path.read_text())
    record["task_passed"] = not record["task_passed"]
    path.write_text(runroot.run_file_text(record))
    refused = {}
    with connect(store_copy / "sabot.duckdb") as con:
        assert ingest_pending(con, run_root, "demo", [("O1", PROBE), (None, PROBE)], "test", refused) == 0
    identity = runroot.read_attempt(run_root, run_root / "demo/langgraph/default/T1/baseline/seed11/attempt-1").identity
    assert ("O1", PROBE) not in reusable_attempts(run_root, "demo", [("O1", PROBE)], identity, refused)
    assert set(refused.values()) == {
        f"attempt {FAULT_SLOT}/attempt-1: runresult.json differs from its seal "
        f"(sha256 {seal.file_hashes(path.parent, ['runresult.json'])['runresult.json'][:12]}, "
        f"sealed {json.loads((path.parent / seal.SEAL_FILE).read_text())['files']['runresult.json'][:12]})"
    }
    with pytest.raises(VerifyError, match=rf"attempt {FAULT_SLOT}/attempt-1: runresult.json differs from its seal"):
        verify_wave(registry, store_copy / "sabot.duckdb", "demo")
    assert _verdicts(store_copy) == before


def test_a_moved_attempt_or_one_sealed_under_another_key_is_refused(store_copy):
    run_root = store_copy / "runroot"
    baseline = run_root / "demo/langgraph/default/T1/baseline/seed11"
    shutil.copytree(baseline / "attempt-1", baseline / "attempt-2")  # unmodified, but not sealed there
    with pytest.raises(
        seal.SealError,
        match=r"attempt demo/langgraph/default/T1/baseline/seed11/attempt-2: sealed as .*/attempt-1 \(moved or copied",
    ):
        runroot.read_attempt(run_root, baseline / "attempt-2")
    (store_copy / seal.KEY_FILE).write_text("00" * 32 + "\n")  # a store that did not seal it
    with pytest.raises(seal.SealError, match=r"attempt-1: seal.json does not verify under this store's key"):
        runroot.read_attempt(run_root, baseline / "attempt-1")


def test_an_edited_stored_reply_is_refused_by_replay_before_any_call(store_copy, registry):
    """The forgery of the issue: a stored model reply edited to add an anchored FLAGS line, then a
    replay. The recording is checked against its seal first: nothing replays, nothing is stored."""
    before = _verdicts(store_copy)
    with connect(store_copy / "sabot.duckdb") as con:
        source_path, raw = con.execute("SELECT source_path, record FROM runs WHERE operator = 'O1'").fetchone()
        record = json.loads(raw)
        reply = record["exchanges"][-1]["reply"]
        reply["choices"][0]["message"]["content"] += "\nFLAGS: the record was edited"
        con.execute("UPDATE runs SET record = ? WHERE operator = 'O1'", [json.dumps(record)])
    # The wave's schedule reads every recording before its first launch: the replay is refused whole.
    with pytest.raises(
        RecordingRefused,
        match=rf"replay of demo-langgraph-T1-default-O1-s11: the store's record of {source_path} differs from the file it was ingested from",
    ):
        _run(registry, store_copy, replay=True)
    with pytest.raises(
        VerifyError, match=rf"store: runs.record of {source_path}: differs from the file it was ingested from"
    ):
        verify_wave(registry, store_copy / "sabot.duckdb", "demo")
    verdicts, attempts = _verdicts(store_copy)
    assert verdicts == before[0]
    assert [a for a in attempts if a[0] == "O1"] == [a for a in before[1] if a[0] == "O1"]


def test_verify_names_edited_scored_fields_the_record_does_not_hold(store_copy, registry):
    """The scorer reads each run's reference-schema fields from `runs.scored`, kept beside the record:
    fields edited there alone (the record and its seal intact) are named by verify."""
    assert verify_wave(registry, store_copy / "sabot.duckdb", "demo").cells
    with connect(store_copy / "sabot.duckdb") as con:
        source_path, raw = con.execute("SELECT source_path, scored FROM runs WHERE operator = 'O1'").fetchone()
        scored = json.loads(raw)
        scored["task_passed"] = not scored["task_passed"]
        con.execute("UPDATE runs SET scored = ? WHERE operator = 'O1'", [json.dumps(scored)])
    with pytest.raises(VerifyError, match=rf"store: runs.scored of {source_path}: not the fields of its record"):
        verify_wave(registry, store_copy / "sabot.duckdb", "demo")


def test_verify_names_an_edited_stored_verdict_and_an_edited_stored_board(store_copy, registry):
    store = store_copy / "sabot.duckdb"
    with connect(store) as con:
        con.execute(
            "UPDATE cell_verdicts SET detected_hard = NOT detected_hard WHERE ruleset = 'v0.2.0' AND operator = 'O1'"
        )
    with pytest.raises(
        VerifyError,
        match=r"store: cell_verdicts of ruleset v0.2.0: cell O1\|langgraph.default.T1.s11: .detected_hard \(published",
    ):
        verify_wave(registry, store, "demo")
    with connect(store) as con:
        con.execute(
            "UPDATE cell_verdicts SET detected_hard = NOT detected_hard WHERE ruleset = 'v0.2.0' AND operator = 'O1'"
        )
        board = json.loads(
            con.execute(
                "SELECT body FROM reports WHERE wave = 'demo' AND ruleset = 'v0.2.1' AND format = 'board.json'"
            ).fetchall()[0][0]
        )
        board["cells"]["valid"] += 1
        con.execute(
            "UPDATE reports SET body = ? WHERE wave = 'demo' AND ruleset = 'v0.2.1' AND format = 'board.json'",
            [json.dumps(board)],
        )
    with pytest.raises(VerifyError, match=r"store: board.json of ruleset v0.2.1: .cells.valid \(published"):
        verify_wave(registry, store, "demo")
