"""Shared pieces of the command line: the project's instance, the registry, error handling."""

import gc
import os

import click

from sabot.debug import debugging
from sabot_assets.constants import PROJECT_ROOT, VAR_DIR


def _instance_env() -> None:
    """Point Dagster at the project's instance (dagster.yaml at the root, storage under var/)."""
    os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT))
    os.environ.setdefault("SABOT_DAGSTER_STORAGE", str(VAR_DIR / "dagster"))
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")


class Context:
    """Lazily built pieces shared by the commands (Dagster imports are slow; `--help` stays fast)."""

    def __init__(self):
        from sabot.registry import Registry

        _instance_env()
        self.registry = Registry()

    def instance(self):
        """The project's Dagster instance, created once per command and only when asked: creating it
        imports Dagster's storage (about half a second), which a command with nothing to do skips."""
        if getattr(self, "_instance", None) is None:
            import dagster as dg

            self._instance = dg.DagsterInstance.get()
        return self._instance

    def defs(self):
        """The definitions, built once per command."""
        if getattr(self, "_defs", None) is None:
            from sabot_assets.definitions import build_definitions

            self._defs = build_definitions(self.registry)
            settle_heap()
        return self._defs


# Young objects allocated between collections of the youngest generation (Python's default: 700).
# A command allocates in bursts (records parsed, events built) and frees little of it in cycles.
YOUNG_COLLECTION_THRESHOLD = 20_000


def settle_heap() -> None:
    """Once the definitions are built: the modules and definitions live as long as the command, so
    they leave the cyclic collector's generations (`gc.freeze`), and the youngest generation is
    collected less often. Together they cut the collector's time in a rescore of wave 2 from about
    0.43 s to 0.06 s of CPU (`docs/figures.md`)."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def expected_failures() -> tuple[type[BaseException], ...]:
    """What a command may end on in the ordinary course (bad input, a held lock, a refused replay, a
    failed materialization): said in one line, never as a traceback (unless --debug)."""
    from judges.hard.acts import ScoringError
    from sabot.budget import BudgetError
    from sabot.corpus import CorpusError
    from sabot.registry import RegistryError
    from sabot.seal import SealError
    from sabot.signing import SigningError
    from sabot.store.db import StoreLocked
    from sabot.store.recordings import RecordingMissing, RecordingRefused
    from sabot.store.wave_replace import OrphanedRuns
    from sabot.trace import TraceError
    from sabot_assets.evidence import VerifyError
    from sabot_assets.materialize import MaterializationError

    return (
        BudgetError,
        CorpusError,
        RegistryError,
        TraceError,
        ScoringError,
        MaterializationError,
        StoreLocked,
        SealError,
        SigningError,
        VerifyError,
        OrphanedRuns,
        RecordingMissing,
        RecordingRefused,
    )


def guarded(fn, *args):
    """Run a command body; the project's expected failures become one clear line and exit status 1."""
    try:
        return fn(*args)
    except expected_failures() as exc:
        if debugging():
            raise
        raise click.ClickException(str(exc)) from exc


def progress_bar(label):
    def progress(blocks):
        with click.progressbar(
            blocks, label=label, item_show_func=lambda b: b and f"{b.framework}/{b.config} {b.first_task}-{b.last_task}"
        ) as bar:
            yield from bar

    return progress


def publish(doc: dict, json_out, started: float) -> None:
    """Print a scored wave's scoreboard; write the full document when asked."""
    import json
    import time

    from sabot.pricing import spend_text
    from sabot_assets.export import scoreboard_text

    click.echo(scoreboard_text(doc))
    if (doc.get("spend") or {}).get("calls"):  # an imported corpus made no calls here: no line
        click.echo(spend_text(doc["spend"], doc.get("project_spend"), doc.get("spend_margin")))
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
        click.echo(f"wrote {json_out}")
    click.echo(f"done in {time.perf_counter() - started:.1f} s")
