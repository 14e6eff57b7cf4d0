"""The published wave-2 tables, line for line, from our own verdicts where we have the traces.

The langgraph/default row is the one the corpus carries raw traces for: its 150 cells come from our
scorer (run through the asset graph on those traces), not from the reference's per-cell table, so a
scorer change that moves one verdict breaks these lines. The other five rows have no traces here;
their cells are the reference's per-cell table, which tests our aggregation only.
"""

import pytest

from sabot.store.db import connect
from sabot.store.verdicts import read_verdicts
from judges.hard.funnel import exclusion_appendix, funnel, median_across_frameworks
from judges.hard.rulesets import load_ruleset
from judges.hard.strict import with_strict
from judges.hard.tables import GROUPINGS, WAVE2_COLUMNS, coverage_lines, funnel_lines, strict_lines
from tests.conftest import WAVE2_DIR, require_corpus
from tests.published import markdown_rows, reference_rows


OURS = ("langgraph", "default")


@pytest.fixture(scope="module")
def rows(registry, scored_wave2):
    require_corpus()
    cells = [r for r in reference_rows(WAVE2_DIR / "wave2-rows.json") if (r["framework"], r["config"]) != OURS]
    with connect(scored_wave2.store_path, read_only=True) as con:
        ours = [r for r in read_verdicts(con, "public_wave2", "v0.2.0") if r["status"] != "carved_out"]
    assert len(ours) == 150 and {(r["framework"], r["config"]) for r in ours} == {OURS}
    cells += ours
    assert len(cells) == 825  # 900 minus the 75 carved-out Magentic cells
    floor = load_ruleset(registry, "v0.2.1")  # the strict floor shipped under v0.2.1 (amendment item 5)
    return with_strict(floor.strict, floor.flags, cells)


@pytest.mark.parametrize(
    ("heading", "grouping", "count"),
    [
        ("## Scoreboard", "framework_config", 6),
        ("## By operator", "operator", 18),
        ("## By task x operator", "task_operator", 165),
    ],
)
def test_funnel_tables(rows, heading, grouping, count):
    published = markdown_rows(WAVE2_DIR / "WAVE2-RESULTS.md", heading)
    ours = funnel_lines(funnel(rows, GROUPINGS[grouping]), WAVE2_COLUMNS)
    assert len(ours) == count
    # Every column but the wave-1 matrix one (third), which pairs against wave-1 traces.
    assert ours == [[p[0], p[1], *p[3:]] for p in published]


def test_exclusion_appendix(rows):
    published = markdown_rows(WAVE2_DIR / "WAVE2-RESULTS.md", "## Exclusion appendix")
    assert [list(map(str, e)) for e in exclusion_appendix(rows)] == published


def test_strict_floor_by_framework_config(rows):
    published = markdown_rows(WAVE2_DIR / "STRICT-FLOOR.md", "## Floor by framework x config")
    # group, valid, strict floor, published union; the QC-pass column is a superseded one-off figure.
    assert strict_lines(rows) == [p[:4] for p in published]


def test_coverage_adjusted_floor(rows):
    assert coverage_lines(rows) == markdown_rows(WAVE2_DIR / "STRICT-FLOOR.md", "## Coverage-adjusted floor")


def test_median_lands_in_the_published_band(rows, registry):
    median, per_framework = median_across_frameworks(rows)
    # QC ledger pass 1: pooled unions autogen 65.28%, crewai 53.47%, langgraph 54.96%; median 54.96%.
    assert {k: round(100 * v, 2) for k, v in per_framework.items()} == {
        "autogen": 65.28,
        "crewai": 53.47,
        "langgraph": 54.96,
    }
    assert round(100 * median, 2) == 54.96
