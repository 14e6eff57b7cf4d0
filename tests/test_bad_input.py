"""Bad input gets a clear error naming what and where, and loses nothing already stored."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.corpus import CorpusError
from sabot.registry import RegistryError
from sabot.store.db import connect
from sabot.store.landing import landed_digest
from sabot.store.runs import record_sql
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
        runs = con.execute(f"SELECT count(*), sum(hash({record_sql()})) FROM runs").fetchone()
        return landed_digest(con, WAVE), runs


def import_bad(env, replace=False):
    return import_corpus(env["registry"], env["defs"], env["instance"], env["store"], env["bad"], WAVE, replace=replace)


def damage(env, rel, edit):
    path = env["bad"] / rel
    path.write_text(edit(path.read_text()))


@pytest.mark.parametrize(
    ("rel", "edit", "message"),
    [
        (RUN, lambda t: t[:-40], "not valid JSON"),
        (
            RUN,
            lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "task_passed"}),
            "missing field(s) task_passed",
        ),
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
    with pytest.raises(
        RegistryError,
        match="unknown wave .wave9.; registered waves: candidate_agent_framework, demo, public_wave1, public_wave2, wave1, wave2",
    ):
        import_corpus(env["registry"], env["defs"], env["instance"], env["store"], env["bad"], "wave9")


def test_the_cli_prints_one_clear_line_and_exits_1(env, tmp_path):
    damage(env, RUN, lambda t: t[:-40])
    proc = subprocess.run(
        [sys.executable, "-m", "sabot_assets.cli", "corpus", "import", str(env["bad"]), "--wave", WAVE],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env={**os.environ, "SABOT_VAR": str(tmp_path / "var")},
        timeout=120,
    )
    assert proc.returncode == 1
    assert f"Error: {RUN}: not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- bounded, transactional import: each refusal names the file, and no row of the store moves -------


def row_counts(store_path) -> dict[str, int]:
    with connect(store_path, read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


def refused(env, match: str) -> str:
    before = row_counts(env["store"]), stored_state(env["store"])
    with pytest.raises(CorpusError) as err:
        import_bad(env)
    assert (row_counts(env["store"]), stored_state(env["store"])) == before
    message = str(err.value)
    assert match in message and "\n" not in message, message
    return message


def test_a_symbolic_link_is_refused_not_followed(env, tmp_path):
    outside = tmp_path / "elsewhere.json"
    shutil.copyfile(env["bad"] / RUN, outside)  # a valid trace, outside the corpus
    (env["bad"] / RUN).unlink()
    (env["bad"] / RUN).symlink_to(outside)
    assert refused(env, "a symbolic link").startswith(f"{RUN}: a symbolic link (to {outside})")


def test_a_linked_directory_is_refused_too(env, tmp_path):
    shutil.move(env["bad"] / BLOCK / "O2", tmp_path / "O2")
    (env["bad"] / BLOCK / "O2").symlink_to(tmp_path / "O2", target_is_directory=True)
    assert refused(env, "a symbolic link").startswith(f"{BLOCK}/O2: a symbolic link")


def test_two_files_for_one_cell_are_refused_naming_both(env):
    shutil.copytree(env["bad"] / BLOCK / "O1" / "seed11", env["bad"] / BLOCK / "O1" / "seed011")
    message = refused(env, "two files for one cell")
    assert f"{BLOCK}/O1/seed011/runresult.json and {RUN}" in message


def test_a_lone_surrogate_is_refused_naming_the_file_and_the_field(env):
    doc = json.loads((env["bad"] / RUN).read_text())
    index = next(i for i, e in enumerate(doc["trace"]["events"]) if isinstance(e["payload"].get("text"), str))
    doc["trace"]["events"][index]["payload"]["text"] = (
        "reviewed: fine \ud800"  # json.dumps writes it as the escape \ud800
    )
    (env["bad"] / RUN).write_text(json.dumps(doc))
    message = refused(env, "a lone surrogate")
    assert message.startswith(
        f"{RUN}: trace.events[{index}].payload.text: a lone surrogate ('\\ud800') at character 15"
    )


def test_a_surrogate_pair_is_text_and_imports(env):
    doc = json.loads((env["bad"] / RUN).read_text())
    doc["trace"]["events"][0]["payload"]["note"] = "\U0001f600"  # written as the pair \ud83d\ude00
    (env["bad"] / RUN).write_text(json.dumps(doc))
    assert "\\ud83d\\ude00" in (env["bad"] / RUN).read_text()
    import_bad(env, replace=True)  # another directory under the same wave: a re-import replaces explicitly


def test_a_file_over_the_registered_cap_is_refused_before_it_is_read(env):
    with open(env["bad"] / RUN, "r+b") as f:
        f.truncate(65 * 2**20)  # sparse: 65 MB as the file system reports it, no disk used
    assert refused(env, "over the registered cap").startswith(
        f"{RUN}: 65.0 MB, over the registered cap of 64 MB for one corpus file (standard/corpus_import.v1.json)"
    )


KILLED_LANDING = """
import os, sys
from pathlib import Path
from sabot.corpus import LIMITS, scan
from sabot.registry import Registry
from sabot.store.db import connect
from sabot.store.landing import write_import

corpus, store, wave = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
registry = Registry()
found = scan(registry.wave(wave), corpus, registry.field(LIMITS, "max_file_bytes"))
last = found.files[-1].path  # landed last: every other file is in the transaction when it is reached
last.unlink()
os.mkfifo(last)  # opening it blocks until a writer comes, which none will
print(last, flush=True)
with connect(store) as con:
    write_import(con, found, registry.content_hash)
"""


def test_an_import_killed_while_landing_leaves_the_store_as_it_was(env):
    before = row_counts(env["store"]), stored_state(env["store"])
    verdict = env["bad"] / BLOCK / "O2" / "seed12" / "judgeverdict.json"
    verdict.write_text(json.dumps({**json.loads(verdict.read_text()), "note": "a corpus unlike the stored one"}))
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_LANDING, str(env["bad"]), str(env["store"]), WAVE],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    fifo = child.stdout.readline().strip()
    assert fifo, child.stderr.read()
    deadline = time.monotonic() + 60
    while True:  # a writer may open the FIFO only once the child holds it open to read: the landing is under way
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "the landing never reached the last file"
            time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # mid-transaction: every file but the last inserted, nothing committed
    assert child.wait() == -signal.SIGKILL
    os.close(writer)
    assert (row_counts(env["store"]), stored_state(env["store"])) == before
