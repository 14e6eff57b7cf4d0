"""Loading the definitions is cheap and quiet: no agent framework, no beta-warning noise."""

import subprocess
import sys
import warnings

from dagster_duckdb import DuckDBResource

from tests.conftest import PROJECT

FRAMEWORKS = ("crewai", "autogen_agentchat", "autogen_core", "langgraph", "langchain_openai")

PROBE = """
import sys
import sabot_assets.definitions as d
after_import = sorted(m for m in {frameworks} if m in sys.modules)
defs = d.defs()  # what `dagster dev` and a run worker load
assert len(defs.resolve_all_asset_specs()) > 0
after_build = sorted(m for m in {frameworks} if m in sys.modules)
print(after_import, after_build)
"""


def test_loading_the_definitions_imports_no_agent_framework(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "SABOT_VAR": str(tmp_path / "var"), "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(frameworks=FRAMEWORKS)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] []", out.stdout


def test_importing_the_definitions_creates_nothing(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "SABOT_VAR": str(tmp_path / "var"), "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", "import sabot_assets.definitions"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "var").exists()


def test_a_framework_is_imported_when_a_run_needs_it():
    from adapters.runner import pipeline_class

    assert pipeline_class("langgraph").__name__ == "LangGraphPipeline"
    assert "langgraph" in sys.modules


def test_building_the_definitions_prints_no_dagster_warning(registry, tmp_path):
    from sabot_assets.definitions import build_definitions

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_definitions(registry, DuckDBResource(database=str(tmp_path / "s.duckdb")))
    noisy = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if "dagster" in w.category.__module__ or "dagster" in str(w.filename)
    ]
    assert noisy == []


def test_loading_the_definitions_imports_neither_pandas_nor_numpy(tmp_path):
    """They are imported where rows are written and statistics compute: a command with nothing to
    do, or a UI start, does not pay for them (about 0.6 s of a 1.5 s load)."""
    env = {"PATH": "/usr/bin:/bin", "SABOT_VAR": str(tmp_path / "var"), "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(frameworks=("pandas", "numpy", "scipy"))],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] []", out.stdout
