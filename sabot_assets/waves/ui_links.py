"""Links into the Dagster UI: a cell's partition, and the exact cells behind a published number.

The UI's partitions view filters each dimension of a multi-partitioned asset by a span text in
the query string (`operator_range`, `probe_range`; `ui-core/src/assets/usePartitionDimensionSelections.tsx`
in Dagster 1.13): comma-separated keys and `[first...last]` runs in definition order, a key quoted
when it holds a character outside `[-a-zA-Z0-9_:/@]` (`partitions/SpanRepresentation.tsx`), as
every probe key does (its dots). A set of
cells is in general not a rectangle of the two dimensions, so a number's cells are linked one
operator at a time: operator fixed, its probes listed, which is exactly those cells.

Links are relative (`/assets/...`), so they open in whichever UI shows them; `SABOT_UI_URL`
(e.g. `http://127.0.0.1:3000`) makes them absolute for the report files read outside the UI.
"""

import os
import re
from itertools import groupby
from urllib.parse import quote, urlencode

from sabot.matrix import Cell
from sabot.registry import WaveDef

CELL_ASSET = "cell_verdicts"  # the asset whose partitions carry each cell's verdict
LATER_READINGS = "later_readings"  # one partition per ruleset added after the wave's registration
NEEDS_QUOTES = re.compile(r"[^-a-zA-Z0-9_:/@]")  # the UI grammar's unquoted key characters, negated


def ui_base() -> str:
    return os.environ.get("SABOT_UI_URL", "").rstrip("/")


def asset_url(wave: str, asset: str, **params: str) -> str:
    query = urlencode(params, quote_via=quote, safe="[],.")
    return f"{ui_base()}/assets/{wave}/{asset}" + (f"?{query}" if query else "")


def partition_url(wave: str, key: str, asset: str = CELL_ASSET) -> str:
    """The partitions view of `asset` with one partition open."""
    return asset_url(wave, asset, view="partitions", partition=key)


def span_key(key: str) -> str:
    """A key as the UI's span grammar reads it: quoted (backslashes and quotes escaped) if needed."""
    if not NEEDS_QUOTES.search(key):
        return key
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def span_text(selected: list[str], ordered: list[str]) -> str:
    """The UI's span text for `selected` keys: contiguous runs (in `ordered`) as `[a...b]`."""
    index = {key: i for i, key in enumerate(ordered)}
    positions = sorted(index[k] for k in set(selected))
    spans = []
    for _, run in groupby(enumerate(positions), key=lambda pair: pair[1] - pair[0]):
        run = [ordered[i] for _, i in run]
        spans.append(span_key(run[0]) if len(run) == 1 else f"[{span_key(run[0])}...{span_key(run[-1])}]")
    return ",".join(spans)


def operator_cells_url(wave: WaveDef, operator: str, probes: list[str], asset: str = CELL_ASSET) -> str:
    """The partitions view showing exactly these probes of one operator."""
    ordered = [p.key for p in wave.probes()]
    return asset_url(
        wave.name, asset, view="partitions", operator_range=operator, probe_range=span_text(probes, ordered)
    )


def cells_by_operator(cells: list[Cell]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for cell in sorted(cells):
        out.setdefault(cell.operator, []).append(cell.probe.key)
    return out


def explain_command(wave: str, table: str, group: str, column: str) -> str:
    return f"sabot explain {wave} {table} {group} {column}"


def explain_cell_command(wave: str, key: str) -> str:
    return f"sabot explain {wave} --cell '{key}'"


def row_cells_url(wave: WaveDef, framework: str, config: str, asset: str = CELL_ASSET) -> str:
    """The partitions view of every cell of one scoreboard row (framework x config), whatever its status."""
    ordered = [p.key for p in wave.probes()]
    row = [p.key for p in wave.probes() if (p.framework, p.config) == (framework, config)]
    return asset_url(
        wave.name,
        asset,
        view="partitions",
        operator_range=span_text(list(wave.operators), list(wave.operators)),
        probe_range=span_text(row, ordered),
    )
