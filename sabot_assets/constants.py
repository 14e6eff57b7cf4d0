"""Paths, environment names and version tags of the Dagster layer, in one place."""

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
VAR_DIR = Path(os.environ.get("SABOT_VAR", PROJECT_ROOT / "var"))
STORE_PATH = Path(os.environ.get("SABOT_DB", VAR_DIR / "sabot.duckdb"))

# Manual versions for the run layer: bumping one is a reviewed decision, never automatic.
IMPORT_RUNS_VERSION = "import-v1"
BOARD_VERSION = "board-v2"
REPORT_VERSION = "report-v2"
PREREGISTRATION_VERSION = "prereg-v1"

REPLAY_TAG = "sabot/replay"  # "true": every model call is answered from the stored exchanges, none sent
COST_TAG = "sabot/cost"  # "cheap" assets may be automated; nothing else ever is

# Live runs: bump RUNNER_VERSION by hand when the pipelines, prompts or scripted model change.
RUNNER_VERSION = "runner-v1"
LLM_POOL = "llm_agent"  # its limit bounds the pipeline runs in flight (sabot_assets/waves/concurrency.py)
CONCURRENCY_TAG = "sabot/concurrency"  # worker processes of one run-asset step (default: the pool limit)
LAUNCHER_TAG = (
    "sabot/launcher"  # "host:pid" of the process executing an in-process run (the CLI), for the stale-slot sweep
)
SCHEDULED_TAG = (
    "sabot/scheduled_by"  # the wave schedule's Dagster run id: run assets settle its attempts, launch nothing
)
RERUN_TAG = "sabot/rerun"  # "true": run every selected cell again, even where a matching complete run is stored
RUN_ERRORS_KEY = "run error cells"  # Failure metadata of a run asset: partition key -> error
SPEND_CEILING_TAG = (
    "sabot/spend_ceiling"  # USD of project spend (at this kind of endpoint) at which no further run is launched
)
NOT_LAUNCHED_KEY = "runs not launched (spend ceiling reached)"  # they stay missing, so a later wave run resumes them
STOPPED_KEY = "endpoint stopped"  # why the provider may not be called; the cells it cut off stay missing
UNINGESTED_KEY = "finished runs waiting in the run root"  # ... and the runs a store lock kept out
LIVE_CHUNK = 50  # partitions per backfill run: one process start per chunk, not per cell
