"""Lineage: a published number walks back to its cells, and a cell to its acts and events."""

import json
import os
import subprocess
import sys

from sabot.store.db import connect
from sabot.store.lineage import cell_detail, number_cells
from tests.conftest import CORPUS, PROJECT


def test_the_union_figure_lists_its_76_numerator_and_138_denominator_cells(scored_wave2):
    with connect(scored_wave2.store_path, read_only=True) as con:
        numerator, denominator = number_cells(
            con, "public_wave2", "v0.2.0", "framework_config", "langgraph/default", "union"
        )
        detail = cell_detail(con, "public_wave2", "v0.2.0", "O1", "langgraph.default.T2.s12")
    assert (len(numerator), len(denominator)) == (76, 138)
    assert {c["probe"] for c in numerator} <= {c["probe"] for c in denominator}
    assert all(c["fault_sha256"] and c["fault_run_id"] for c in denominator)
    assert [a["act"] for a in detail["acts"] if a["surface"] == "mapping"] == ["reject", "retry_with_reason", "reject"]
    assert {e["seq"] for e in detail["events"]} == {a["seq"] for a in detail["acts"]}
    # payloads are read from the run's record (the events table holds none): the corpus file's own
    trace = json.loads((CORPUS / "harness/runs/wave2/langgraph/default/T2/O1/seed12/runresult.json").read_text())[
        "trace"
    ]
    assert [e["payload"] for e in detail["events"]] == [
        e["payload"] for e in trace["events"] if e["seq"] in {a["seq"] for a in detail["acts"]}
    ]


def test_the_cli_prints_the_same_lineage(scored_wave2, tmp_path):
    env = {**os.environ, "SABOT_DB": str(scored_wave2.store_path)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sabot_assets.cli",
            "explain",
            "public_wave2",
            "framework_config",
            "langgraph/default",
            "union",
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "55.1% (76/138)" in out and "numerator: 76 cells" in out and "denominator: 138 cells" in out


def _explain(scored_wave2, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "SABOT_DB": str(scored_wave2.store_path)}
    return subprocess.run(
        [sys.executable, "-m", "sabot_assets.cli", "explain", "public_wave2", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_headline_column_has_one_name_and_a_cell_needs_no_number(scored_wave2):
    out = _explain(scored_wave2, "framework_config", "langgraph/default", "DETECTED_HARD")
    assert out.returncode == 0 and "DETECTED_HARD: 55.1% (76/138)" in out.stdout
    cell = _explain(scored_wave2, "--cell", "O1|langgraph.default.T2.s12")
    assert cell.returncode == 0 and "numerator" not in cell.stdout
    assert (
        cell.stdout.startswith("cell O1|langgraph.default.T2.s12:")
        and "act seq" in cell.stdout
        and "event seq" in cell.stdout
    )
    # An event payload shortened to a line says so; --full prints it whole.
    shortened = [line for line in cell.stdout.splitlines() if line.startswith("  event seq") and "[shortened:" in line]
    full = _explain(scored_wave2, "--cell", "O1|langgraph.default.T2.s12", "--full").stdout
    assert all("[shortened:" not in line for line in full.splitlines())
    for line in shortened:  # the full line begins with what was shown, and goes on
        head = line.split("… [shortened:")[0]
        assert any(f.startswith(head) and len(f) > len(head) for f in full.splitlines()), line
    half = _explain(scored_wave2, "framework_config", "langgraph/default")
    assert half.returncode == 2 and "TABLE ROW COLUMN" in half.stderr
