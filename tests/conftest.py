"""Shared fixtures: the reference corpus beside the project, and scored waves in temp stores."""

import atexit
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

# Tests never write the developer's store: commands run in this process (click's CliRunner) read
# SABOT_VAR when sabot_assets.constants is first imported, which is below.
os.environ["SABOT_VAR"] = tempfile.mkdtemp(prefix="sabot-tests-var-")
atexit.register(shutil.rmtree, os.environ["SABOT_VAR"], True)
os.environ.pop("SABOT_DB", None)

import dagster as dg
import pytest
from dagster_duckdb import DuckDBResource

from sabot.registry import Registry
from sabot_assets.corpus_jobs import import_corpus, score_corpus
from sabot_assets.definitions import build_definitions

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared"
CORPUS = SHARED / "external" / "sabot-public"
WAVE2_DIR = CORPUS / "harness" / "runs" / "wave2"


def require_corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the reference corpus is not beside the project ({CORPUS})")
    return CORPUS


@pytest.fixture(scope="session")
def registry() -> Registry:
    return Registry()


class ScoredWave:
    """A wave imported and scored through the asset graph, in its own store and instance."""

    def __init__(self, registry, tmp: Path, wave: str, instance, corpus: Path = CORPUS, scorer=None):
        self.store_path = tmp / "sabot.duckdb"
        self.defs = build_definitions(registry, DuckDBResource(database=str(self.store_path)), scorer=scorer)
        self.instance = instance
        self.imported = import_corpus(registry, self.defs, instance, self.store_path, corpus, wave)
        score_corpus(self.imported)


def _scored(registry, tmp_path_factory, wave):
    require_corpus()
    tmp = tmp_path_factory.mktemp(wave)
    (tmp / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "dagster")) as instance:
        yield ScoredWave(registry, tmp, wave, instance)


@pytest.fixture(scope="session")
def scored_wave2(registry, tmp_path_factory):
    yield from _scored(registry, tmp_path_factory, "public_wave2")


@pytest.fixture(scope="session")
def scored_wave1(registry, tmp_path_factory):
    yield from _scored(registry, tmp_path_factory, "public_wave1")


def audited_sockets():
    """Yield the list of every host a socket connects to or resolves until the generator ends
    (audit hooks cannot be removed, so this one is switched off instead)."""
    seen, state = [], {"on": True}

    def hook(event, args):
        if not state["on"]:
            return
        if event == "socket.connect":
            if getattr(args[0], "family", None) == socket.AF_UNIX:
                return  # a Unix-domain socket (the confined pipeline server's) is a local file, never a request
            address = args[1]
            seen.append(address[0] if isinstance(address, tuple) else address)
        elif event == "socket.getaddrinfo":
            seen.append(args[0])

    sys.addaudithook(hook)
    yield seen
    state["on"] = False


@pytest.fixture
def socket_addresses():
    yield from audited_sockets()


# The suite runs on two workers, one file each (pyproject: -n 2 --dist loadfile), handed out in
# collection order: the longest files go first so that no long file starts last, alone.
LONGEST_FIRST = (
    "test_live_wave2.py",
    "test_live_wave.py",
    "test_budget_wave.py",
    "test_ui_metadata.py",
    "test_registry_guard.py",
    "test_ui_lineage.py",
    "test_resume.py",
    "test_byo.py",
    "test_byo_project_checks.py",
    "test_compare.py",
    "test_reference_wave1.py",
    "test_export.py",
    "test_agent_framework_provider.py",
    "test_magentic_observability.py",
    "test_project_gate.py",
    "test_confinement.py",
    "test_key_redaction.py",
    "test_signed_bundles.py",
    "test_reimport.py",
    "test_one_line_failures.py",
    "test_wave_stop.py",
    "test_killed_runs.py",
    "test_no_survivors.py",
    "test_wave_progress.py",
    "test_shared_ceiling.py",
)


# Last: the real local model server's slice, which waits for the server's build that CI starts in the
# background as it begins (.ci/run); by the end of the suite that build is done.
LAST = ("test_local_model_slice.py",)
# Before any wave has run: late in the suite this check's own fork server hung, even in a new
# interpreter (what the earlier tests leave behind is not yet known).
FIRST = ("test_forkserver_stop.py",)


def pytest_collection_modifyitems(items):
    rank = {name: i - len(FIRST) for i, name in enumerate(FIRST)}
    rank.update({name: i for i, name in enumerate(LONGEST_FIRST)})
    rank.update({name: len(LONGEST_FIRST) + 1 + i for i, name in enumerate(LAST)})
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: each file keeps its own order


@pytest.fixture(autouse=True)
def own_endpoint_state(tmp_path_factory, monkeypatch):
    """Each test its own endpoint breakers and rate buckets: a dead endpoint one test counts failures
    on must not open the same endpoint for the next test."""
    monkeypatch.setenv("SABOT_LIMITER_DIR", str(tmp_path_factory.mktemp("limiter")))
