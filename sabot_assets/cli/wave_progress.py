"""The live progress of a wave run on the terminal: runs done / in flight / failed, calls, spend so
far, the slowest run in flight and an ETA, read from the run root (what the runs write as they go:
their attempt directories and exchange journals), redrawn with `rich` (already in the lock, through
Dagster; pinned in pyproject). Quiet when the output is not a terminal: a log or a pipe gets only the
command's own lines."""

import contextlib
import datetime as dt
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sabot.exchange_journal import JOURNAL_FILE, read_journal
from sabot.pricing import PriceTable, call_rows
from sabot.runroot import META_FILE

REFRESH_SECONDS = 0.5


@dataclass
class Snapshot:
    """The wave's runs begun since the command started, as the run root shows them now."""

    done: int = 0
    failed: int = 0  # finished as RUN_ERROR
    in_flight: int = 0
    calls: int = 0
    spend: float = 0.0  # metered, at the registered prices
    slowest: tuple[str, float] | None = None  # the run in flight longest: (its slot, seconds)
    _finished: dict = field(default_factory=dict, repr=False)  # attempt dir -> (outcome, calls, spend): read once

    def line(self, total: int | None, elapsed: float, simulated: bool) -> str:
        text = f"runs: {self.done} done, {self.in_flight} in flight, {self.failed} failed"
        text += f" of {total}" if total else ""
        money = "simulated, no money spent" if simulated else "metered"
        text += f" | calls {self.calls} | spend ${self.spend:.4f} ({money})"
        if self.slowest:
            text += f" | slowest in flight: {self.slowest[0]} {self.slowest[1]:.0f} s"
        if total and self.done:
            left = max(0, total - self.done - self.failed)
            text += f" | ETA {left * elapsed / (self.done + self.failed):.0f} s"
        return text


def _journal_cost(directory: Path, prices: PriceTable) -> tuple[int, float]:
    _, entries = read_journal(directory)
    rows = [row for attempt, x in entries for row in call_rows([x], prices, attempt)]
    return len(rows), sum(r["cost_usd"] or 0.0 for r in rows)


def snapshot(run_root: Path, wave: str, since: float, prices: PriceTable, previous: Snapshot | None = None) -> Snapshot:
    """What the wave's attempts begun after `since` (epoch seconds) show: finished ones are read once."""
    now, found = time.time(), Snapshot(_finished=previous._finished if previous else {})
    for journal in Path(run_root).glob(f"{wave}/*/*/*/*/*/attempt-*/{JOURNAL_FILE}"):
        directory = journal.parent
        try:
            if directory.stat().st_mtime < since and directory not in found._finished:
                continue  # an earlier command's attempt
        except OSError:
            continue
        meta = directory / META_FILE
        if directory in found._finished or meta.exists():
            if directory not in found._finished:
                try:
                    outcome = json.loads(meta.read_text()).get("outcome")
                except (OSError, ValueError):
                    continue  # being written: counted on the next look
                found._finished[directory] = (outcome, *_journal_cost(directory, prices))
            outcome, calls, spend = found._finished[directory]
            found.failed += outcome == "run_error"
            found.done += outcome != "run_error"
        else:
            found.in_flight += 1
            calls, spend = _journal_cost(directory, prices)
            header, _ = read_journal(directory)
            started = _epoch(header.get("started_at")) if header else None
            if started is not None and (found.slowest is None or now - started > found.slowest[1]):
                found.slowest = ("/".join(directory.relative_to(run_root).parts[1:6]), now - started)
        found.calls += calls
        found.spend += spend
    return found


def _epoch(stamp: str | None) -> float | None:
    try:
        return dt.datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        return None


@contextlib.contextmanager
def live_progress(run_root: Path, wave: str, prices: PriceTable, total: int | None, simulated: bool, stream=None):
    """Redraw the wave's progress line while the body runs; yields whether it is shown (a terminal)."""
    stream = stream or sys.stdout
    if not stream.isatty():
        yield False
        return
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    started, state = time.time(), {"last": None}

    def render() -> Text:
        state["last"] = snapshot(run_root, wave, started - 1, prices, state["last"])
        return Text(f"{wave}: " + state["last"].line(total, time.time() - started, simulated))

    with Live(
        get_renderable=render, console=Console(file=stream), refresh_per_second=1 / REFRESH_SECONDS, transient=False
    ):
        yield True
