"""Every answered model call, on disk before the pipeline sees its answer.

A run's gateway appends each exchange (request, response, usage) to `exchanges.jsonl` in the run's
attempt directory and fsyncs it before returning the answer, so a run killed in flight (kill -9 of
its command, the OOM killer) leaves every call it was answered in its run root. The first line is
the attempt's header (who ran it, against what). The next command finishes such an attempt as
`stopped` (`finish_killed`): a record holding the journal's exchanges and their priced usage, which
ingest stores like any attempt, so its spend counts against the cap and the budget and `explain`
shows its calls under the killed attempt. A finished attempt's journal is sealed with it.
"""

import json
import os
import threading
import time
from pathlib import Path

from sabot import runroot
from sabot.pricing import PriceTable, call_rows, totals
from sabot.runroot import Identity
from sabot.shared_state import host_label
from sabot.trace import RunRecord

JOURNAL_FILE = "exchanges.jsonl"
KILLED = "killed: the run's process died before it finished"
# A run whose command died ends within seconds (it dies with its parent; the command's watcher sweeps
# the rest), but the next command may start sooner: that long, a run of a slot no command holds is let end.
ORPHAN_GRACE_SECONDS = 10.0


class ExchangeJournal:
    """The append-only journal of one attempt directory; `attempt` is the runner's try (1, or 2 after its retry-once)."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / JOURNAL_FILE
        self.attempt = 1
        self._lock = threading.Lock()

    def begin(self, run_id: str, identity: Identity, started_at: str, dagster_run_id: str) -> "ExchangeJournal":
        self._append(
            {
                "header": {
                    "run_id": run_id,
                    "identity": identity.as_dict(),
                    "started_at": started_at,
                    "dagster_run_id": dagster_run_id,
                    "holder": f"{host_label()}:{os.getpid()}",
                }
            }
        )
        return self

    def write(self, exchange: dict) -> None:
        """Append one exchange durably (fsync): called before its answer is returned to the pipeline."""
        self._append({"attempt": self.attempt, "exchange": exchange})

    def _append(self, entry: dict) -> None:
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def read_journal(directory: Path) -> tuple[dict | None, list[tuple[int, dict]]]:
    """(header, [(attempt, exchange), ...]); a last line cut short by the kill is left out."""
    header, entries = None, []
    try:
        lines = (Path(directory) / JOURNAL_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None, []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # torn by the kill mid-write: that call's answer never reached the pipeline
        if "header" in entry:
            header = entry["header"]
        elif "exchange" in entry:
            entries.append((int(entry.get("attempt") or 1), entry["exchange"]))
    return header, entries


def finish_killed(root: Path, wave: str, probe, operator: str | None, prices: PriceTable) -> list[Path]:
    """Finish, as `stopped`, every unfinished attempt of this slot whose journal says it was started and
    whose process is gone (on this host; another host's is never judged here). Returns those directories."""
    host, finished = host_label(), []
    if runroot.live_claim(root, wave, probe, operator, host) is not None:
        return finished  # a live command holds the slot: its run may still be writing
    for directory in runroot.unfinished_attempts(root, wave, probe, operator):
        header, entries = read_journal(directory)
        if header is None:
            _remove_if_never_begun(directory)
            continue
        if not _gone_within_grace(header["holder"], host):
            continue
        exchanges = [x for _, x in entries]
        rows = [row for attempt, x in entries for row in call_rows([x], prices, attempt)]
        error = f"{KILLED}; {len(exchanges)} call(s) it made kept from its journal"
        endpoint = header["identity"]["endpoint"]
        record = RunRecord(
            header["run_id"],
            probe.framework,
            probe.config,
            probe.task,
            operator,
            probe.seed,
            (),
            None,
            False,
            False,
            error,
            extra={
                "endpoint": endpoint,
                "exchanges": exchanges,
                "usage": {**totals(rows, prices.source), "per_call": rows},
            },
        )
        runroot.write_attempt(
            directory,
            wave,
            record,
            "stopped",
            Identity(**header["identity"]),
            [],
            header["dagster_run_id"],
            header["started_at"],
        )
        finished.append(directory)
    return finished


def _gone_within_grace(holder: str, host: str) -> bool:
    """Whether the run's process is gone, waiting up to ORPHAN_GRACE_SECONDS for one whose command died
    (the caller holds that no live command claims the slot); another host's is never judged here."""
    deadline = time.monotonic() + ORPHAN_GRACE_SECONDS
    while not runroot.holder_gone(holder, host):
        if holder.rpartition(":")[0] != host or time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _remove_if_never_begun(directory: Path) -> None:
    """An attempt directory a kill left empty, in the instant between its creation and its journal's first
    line, holds nothing: no call was made, no answer given. It is removed (only while empty), so the
    slot's history lists attempts that began."""
    try:
        directory.rmdir()
    except OSError:
        pass  # not empty: something began there after all; left as it is
