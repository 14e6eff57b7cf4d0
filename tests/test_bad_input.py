"""Bad input gets a clear error naming what and where, and loses nothing already stored."""

import json
import os
import shutil
import subprocess
import sys

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.corpus import CorpusError
from sabot.registry import RegistryError
from sabot.store.db import connect
from sabot.store.landing import landed_digest
from sabot_assets.corpus_jobs import import_corpus
from sabot_assets.definitions import build_definitions
from tests.conftest import PROJECT, WAVE2_DIR, require_corpus

WAVE = "public_wave2"
BLOCK = "harness/runs/wave2/langgraph/default/T1"
RUN = f"{BLOCK}/O1/seed11/runresult.json"


@pytest.fixture
def env(registry, tmp_path):
    """A store holding one good import, and a fresh copy of that corpus to damage."""
    require_corpus()
    good = tmp_path / "good"
    shutil.copytree(WAVE2_DIR / "langgraph" / "default" / "T1", good / BLOCK)
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    store_path = tmp_path / "store.duckdb"
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        defs = build_definitions(registry, DuckDBResource(database=str(store_path)))
        import_corpus(registry, defs, instance, store_path, good, WAVE)
        yield {"registry": registry, "defs": defs, "instance": instance, "store": store_path, "bad": bad}


def stored_state(store_path):
    with connect(store_path, read_only=True) as con:
        runs = con.execute("SELECT count(*), sum(hash(record)) FROM runs").fetchone()
        return landed_digest(con, WAVE), runs


def import_bad(env):
    return import_corpus(env["registry"], env["defs"], env["instance"], env["store"], env["bad"], WAVE)


def damage(env, rel, edit):
    path = env["bad"] / rel
    path.write_text(edit(path.read_text()))


@pytest.mark.parametrize(
    ("rel", "edit", "message"),
    [
        (RUN, lambda t: t[:-40], "not valid JSON"),
        (RUN, lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "task_passed"}), "missing field(s) task_passed"),
        (RUN, lambda t: t.replace('"seq": 3', '"seq": "three"', 1), "trace.events[2].seq: expected int"),
        (RUN, lambda t: t.replace('"seed": 11', '"seed": 12', 1), "trace.seed is 12 but the path says 11"),
    ],
)
def test_malformed_files_are_named_and_nothing_is_written(env, rel, edit, message):
    before = stored_state(env["store"])
    damage(env, rel, edit)
    with pytest.raises(CorpusError) as err:
        import_bad(env)
    assert rel in str(err.value) and message in str(err.value)
    assert stored_state(env["store"]) == before


def test_an_unknown_operator_directory_is_named(env):
    before = stored_state(env["store"])
    shutil.copytree(env["bad"] / BLOCK / "O1", env["bad"] / BLOCK / "O7")
    with pytest.raises(CorpusError, match=r"O7/seed11/runresult.json: unknown operator 'O7'"):
        import_bad(env)
    assert stored_state(env["store"]) == before


def test_an_unregistered_wave_lists_the_registered_ones(env):
    with pytest.raises(RegistryError, match="unknown wave .wave9.; registered waves: demo, public_wave1, public_wave2, wave1, wave2"):
        import_corpus(env["registry"], env["defs"], env["instance"], env["store"], env["bad"], "wave9")


def test_the_cli_prints_one_clear_line_and_exits_1(env, tmp_path):
    damage(env, RUN, lambda t: t[:-40])
    proc = subprocess.run(
        [sys.executable, "-m", "sabot_assets.cli", "corpus", "import", str(env["bad"]), "--wave", WAVE],
        cwd=PROJECT, capture_output=True, text=True, env={**os.environ, "SABOT_VAR": str(tmp_path / "var")}, timeout=120,
    )
    assert proc.returncode == 1
    assert f"Error: {RUN}: not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
