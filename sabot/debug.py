"""`sabot --debug`: whether failures print whole (Dagster's step failures, a pipeline's own log, every
traceback) rather than as the one line each expected failure is said in. An environment variable,
so the run processes a command forks read it too."""

import os

DEBUG_ENV = "SABOT_DEBUG"


def debugging() -> bool:
    return bool(os.environ.get(DEBUG_ENV))
