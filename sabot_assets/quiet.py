"""Dagster's beta features that this project uses on purpose, without their warnings.

`BackfillPolicy.single_run()` on the cheap assets and `MultiToSingleDimensionPartitionMapping`
(a cell reads its own probe's baseline) are both marked beta in Dagster 1.13; each use would
print a `BetaWarning` per asset and bury the board. Only those two are silenced, only while the
definitions are built; any other warning still prints.
"""

import contextlib
import warnings

import dagster as dg

ON_PURPOSE = (
    r"Parameter `backfill_policy` of (function|initializer) `\w+` is currently in beta",
    r"Class `MultiToSingleDimensionPartitionMapping` is currently in beta",
)


@contextlib.contextmanager
def beta_used_on_purpose():
    with warnings.catch_warnings():
        for message in ON_PURPOSE:
            warnings.filterwarnings("ignore", message=message, category=dg.BetaWarning)
        yield
