"""Lineage: a published number walks back to its cells, and a cell to its acts and events."""

import os
import subprocess
import sys

from sabot.store.db import connect
from sabot.store.lineage import cell_detail, number_cells
from tests.conftest import PROJECT


def test_the_union_figure_lists_its_76_numerator_and_138_denominator_cells(scored_wave2):
    with connect(scored_wave2.store_path, read_only=True) as con:
        numerator, denominator = number_cells(con, "public_wave2", "v0.2.0", "framework_config", "langgraph/default", "union")
        detail = cell_detail(con, "public_wave2", "v0.2.0", "O1", "langgraph.default.T2.s12")
    assert (len(numerator), len(denominator)) == (76, 138)
    assert {c["probe"] for c in numerator} <= {c["probe"] for c in denominator}
    assert all(c["fault_sha256"] and c["fault_run_id"] for c in denominator)
    assert [a["act"] for a in detail["acts"] if a["surface"] == "mapping"] == ["reject", "retry_with_reason", "reject"]
    assert {e["seq"] for e in detail["events"]} == {a["seq"] for a in detail["acts"]}


def test_the_cli_prints_the_same_lineage(scored_wave2, tmp_path):
    env = {**os.environ, "SABOT_DB": str(scored_wave2.store_path)}
    out = subprocess.run(
        [sys.executable, "-m", "sabot_assets.cli", "explain", "public_wave2", "framework_config", "langgraph/default", "union"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "55.1% (76/138)" in out and "numerator: 76 cells" in out and "denominator: 138 cells" in out
