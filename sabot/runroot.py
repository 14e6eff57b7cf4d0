"""The run root: where every live run attempt is first written, before any store sees it.

A run writes its record in the reference corpus layout (the file `sabot.corpus` reads), one
directory per attempt, so no store lock can lose a finished run and a worker on another host
needs only the directory:

    <root>/<wave>/<framework>/<config>/<task>/<operator|baseline>/seed<N>/attempt-<k>/
        runresult.json | baseline-runresult.json   the run record (reference format)
        intent.json                                what the scripted model decided (never scored)
        attempt.json                               outcome and identity; written last: its
                                                   presence means the attempt finished
        seal.json                                  the SHA-256 of the three files above, under the
                                                   store's key (`sabot.seal`); written before attempt.json

Attempt numbers are allocated with an exclusive mkdir, so concurrent workers never share one.
An attempt directory without attempt.json is a run that never finished (killed): it is ignored.
A finished attempt is read back only if its seal verifies (`read_attempt`): an edited file, a
hand-placed attempt or one moved to another slot raises SealError naming the directory.
"""

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from sabot.corpus import BASELINE_DIR
from sabot.matrix import Probe
from sabot import seal
from sabot.registry import sha256_bytes
from sabot.trace import RunRecord, TraceError, parse_runresult, to_runresult

META_FILE, INTENT_FILE = "attempt.json", "intent.json"
PIPELINE_LOG = "pipeline.log"  # what the frameworks logged during the run, if anything
LOGGED_FILES = (
    PIPELINE_LOG,
    "exchanges.jsonl",
)  # sabot.exchange_journal.JOURNAL_FILE  # written while the run executes; sealed with the attempt when present
OUTCOMES = ("complete", "run_error", "stopped")  # stopped: cut off by a budget, never scored


def run_file_name(operator: str | None) -> str:
    return "runresult.json" if operator else "baseline-runresult.json"


def slot_dir(root: Path, wave: str, probe: Probe, operator: str | None) -> Path:
    return (
        Path(root)
        / wave
        / probe.framework
        / probe.config
        / probe.task
        / (operator or BASELINE_DIR)
        / f"seed{probe.seed}"
    )


@dataclass(frozen=True)
class Identity:
    """What a stored run must match to be reused instead of run again."""

    runner_version: str
    endpoint: str
    pipeline_model: str
    downgrade_model: str
    protocol: int
    # A project's run: the hashes of the team's code it executed, by role (`Project.code_hashes`);
    # empty for built-in runs, whose code is the runner version.
    code: dict = field(default_factory=dict, hash=False)

    def as_dict(self) -> dict:
        doc = {
            "runner_version": self.runner_version,
            "endpoint": self.endpoint,
            "pipeline_model": self.pipeline_model,
            "downgrade_model": self.downgrade_model,
            "protocol": self.protocol,
        }
        return {**doc, "code": self.code} if self.code else doc

    def change_from(self, stored: "Identity") -> str:
        """Why a run stored with `stored` is not reused under this identity (for the CLI)."""
        from sabot.projects import code_change

        moved = [
            name
            for name in ("runner_version", "endpoint", "pipeline_model", "downgrade_model", "protocol")
            if getattr(self, name) != getattr(stored, name)
        ]
        reasons = [f"{name.replace('_', ' ')} {getattr(stored, name)} -> {getattr(self, name)}" for name in moved]
        if self.code != stored.code:
            reasons.append(code_change(stored.code, self.code))
        return "; ".join(reasons)


@dataclass(frozen=True)
class Attempt:
    """One finished attempt at one run slot, as read back from its directory."""

    wave: str
    operator: str | None
    probe: Probe
    number: int
    outcome: str
    identity: Identity
    record: RunRecord
    sha256: str  # of the run file's bytes
    source_path: str  # the run file, relative to the run root
    intent: list
    dagster_run_id: str
    started_at: str
    finished_at: str
    directory: Path | None = None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def allocate(root: Path, wave: str, probe: Probe, operator: str | None) -> Path:
    """A fresh attempt directory for this slot: attempt-1, attempt-2, ... (exclusive mkdir)."""
    base = slot_dir(root, wave, probe, operator)
    base.mkdir(parents=True, exist_ok=True)
    n = 1 + max((_number(p) for p in base.glob("attempt-*")), default=0)
    while True:
        try:
            (base / f"attempt-{n}").mkdir()
            return base / f"attempt-{n}"
        except FileExistsError:
            n += 1


def _number(path: Path) -> int:
    tail = path.name.removeprefix("attempt-")
    return int(tail) if tail.isdigit() else 0


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_attempt(
    directory: Path,
    wave: str,
    record: RunRecord,
    outcome: str,
    identity: Identity,
    intent: list,
    dagster_run_id: str,
    started_at: str,
) -> Path:
    """Write a finished attempt: record and intent first, then its seal, attempt.json last (the
    finish marker), so a finished attempt always has its seal. The seal's key is the store's, found
    from the run root this directory is in (`sabot.seal.key_path`)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; outcomes: {', '.join(OUTCOMES)}")
    directory = Path(directory)
    root = directory.parents[6]  # <root>/<wave>/<framework>/<config>/<task>/<operator>/seed<N>/attempt-<k>
    run_file = run_file_name(record.operator)
    texts = {run_file: run_file_text(to_runresult(record)), INTENT_FILE: json.dumps(intent, ensure_ascii=False) + "\n"}
    for name, text in texts.items():
        _write_atomic(directory / name, text)
    meta = {
        "wave": wave,
        "outcome": outcome,
        "identity": identity.as_dict(),
        "dagster_run_id": dagster_run_id,
        "started_at": started_at,
        "finished_at": _now(),
    }
    texts[META_FILE] = json.dumps(meta, indent=1, sort_keys=True) + "\n"
    hashes = {name: sha256_bytes(text.encode()) for name, text in texts.items()}
    hashes |= seal.file_hashes(directory, [name for name in LOGGED_FILES if (directory / name).is_file()])
    seal.write_seal(directory, directory.relative_to(root).as_posix(), hashes, seal.store_key(root))
    _write_atomic(directory / META_FILE, texts[META_FILE])
    return directory


def run_file_text(runresult: dict) -> str:
    """A run file's bytes, as written to the run root: a stored record re-serialized this way hashes
    to its `source_sha256`, which is how a stored record is checked against its sealed file."""
    return json.dumps(runresult, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def started_now() -> str:
    return _now()


def read_attempt(root: Path, directory: Path, key: bytes | None = None) -> Attempt:
    """Read and validate a finished attempt: one that is not sealed, or differs from its seal, raises
    SealError; a malformed one raises TraceError naming the file."""
    root, directory = Path(root), Path(directory)
    rel = directory.relative_to(root)
    source = rel.as_posix()
    if len(rel.parts) != 7 or not rel.parts[6].startswith("attempt-"):
        raise TraceError(source, "path", "not <wave>/<framework>/<config>/<task>/<operator>/seed<N>/attempt-<k>")
    sealed = seal.verify(root, directory, key)
    wave, framework, config, task, op_dir, seed_dir, _ = rel.parts
    operator = None if op_dir == BASELINE_DIR else op_dir
    try:
        meta = json.loads((directory / META_FILE).read_text())
        raw = (directory / run_file_name(operator)).read_bytes()
        obj = json.loads(raw)
        intent_path = directory / INTENT_FILE
        intent = json.loads(intent_path.read_text()) if intent_path.exists() else []
    except (OSError, json.JSONDecodeError) as exc:
        raise TraceError(source, "attempt", f"unreadable ({exc})") from exc
    if sha256_bytes(raw) != sealed.files.get(run_file_name(operator)):  # changed between the check and this read
        raise seal.SealError(f"attempt {source}: {run_file_name(operator)} differs from its seal")
    record = parse_runresult(obj, f"{source}/{run_file_name(operator)}")
    probe = Probe(framework, config, task, int(seed_dir.removeprefix("seed")))
    for name, want in (
        ("framework", framework),
        ("config", config),
        ("task", task),
        ("operator", operator),
        ("seed", probe.seed),
    ):
        if getattr(record, name) != want:
            raise TraceError(source, f"trace.{name}", f"is {getattr(record, name)!r} but the path says {want!r}")
    if meta.get("outcome") not in OUTCOMES:
        raise TraceError(f"{source}/{META_FILE}", "outcome", f"unknown outcome {meta.get('outcome')!r}")
    return Attempt(
        wave=wave,
        operator=operator,
        probe=probe,
        number=_number(directory),
        outcome=meta["outcome"],
        identity=Identity(**meta["identity"]),
        record=record,
        sha256=sha256_bytes(raw),
        source_path=f"{source}/{run_file_name(operator)}",
        intent=intent,
        dagster_run_id=meta.get("dagster_run_id", ""),
        started_at=meta.get("started_at", ""),
        finished_at=meta.get("finished_at", ""),
        directory=directory,
    )


def finished_attempts(root: Path, wave: str, probe: Probe, operator: str | None) -> list[Path]:
    """The finished attempt directories of one slot, oldest first."""
    base = slot_dir(root, wave, probe, operator)
    return sorted((p for p in base.glob("attempt-*") if (p / META_FILE).exists()), key=_number)


def unfinished_attempts(root: Path, wave: str, probe: Probe, operator: str | None) -> list[Path]:
    """Attempt directories whose run never finished (the process died mid-run)."""
    base = slot_dir(root, wave, probe, operator)
    return sorted((p for p in base.glob("attempt-*") if not (p / META_FILE).exists()), key=_number)


# ---------------------------------------------------------------------------
# Claims: a slot is claimed before it runs, so two commands never run it twice
# ---------------------------------------------------------------------------

CLAIM_FILE = "claim.json"
HALF_WRITTEN_SECONDS = 10.0  # an unreadable claim younger than this is still being written


def _age_seconds(path: Path) -> float:
    import time

    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def holder_gone(holder: str, host: str) -> bool:
    """A "host:pid" holder (a claim, a run's launcher) that was a process on this host and no longer
    exists; another host's is never judged here."""
    claim_host, _, pid = holder.rpartition(":")
    if claim_host != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(int(pid))


def _zombie(pid: int) -> bool:
    """A killed process its new parent has not reaped yet: it runs nothing any more. (Linux /proc;
    elsewhere a live pid is taken as alive.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].startswith(("Z", "X"))


def claim_record(root: Path, wave: str, probe: Probe, operator: str | None) -> dict | None:
    """The claim file's content ({"holder", "at"} and, for a Dagster step's claim, "owner"), or None."""
    try:
        record = json.loads((slot_dir(root, wave, probe, operator) / CLAIM_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "holder" in record else None


def claim_holder(root: Path, wave: str, probe: Probe, operator: str | None) -> str | None:
    record = claim_record(root, wave, probe, operator)
    return None if record is None else record["holder"]


def claim(
    root: Path,
    wave: str,
    probe: Probe,
    operator: str | None,
    holder: str,
    host: str,
    owner: str | None = None,
    stale=None,
) -> bool:
    """Claim a slot for `holder` ("host:pid") with an exclusive create; a claim whose process is gone
    (on this host), or that `stale(record)` says is over (its owner, e.g. a Dagster run, ended), is
    taken over. `owner` is recorded beside the holder. False: a live process holds it."""
    base = slot_dir(root, wave, probe, operator)
    base.mkdir(parents=True, exist_ok=True)
    path = base / CLAIM_FILE
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            record = claim_record(root, wave, probe, operator)
            current = None if record is None else record["holder"]
            if current == holder:
                return True
            if current is None and _age_seconds(path) < HALF_WRITTEN_SECONDS:
                return False  # being written by the process that just created it
            if current is not None and not holder_gone(current, host) and not (stale is not None and stale(record)):
                return False
            path.unlink(missing_ok=True)  # a dead holder's (or a half-written) claim
            continue
        with os.fdopen(fd, "w") as fh:
            json.dump({"holder": holder, "at": _now(), **({"owner": owner} if owner else {})}, fh)
        return True
    return False


def live_claim(root: Path, wave: str, probe: Probe, operator: str | None, host: str) -> str | None:
    """The holder of a slot's claim while that process lives (as far as this host can tell)."""
    holder = claim_holder(root, wave, probe, operator)
    return None if holder is None or holder_gone(holder, host) else holder


def release_claim(root: Path, wave: str, probe: Probe, operator: str | None, holder: str) -> None:
    if claim_holder(root, wave, probe, operator) == holder:
        (slot_dir(root, wave, probe, operator) / CLAIM_FILE).unlink(missing_ok=True)
