"""Dagster's beta features that this project uses on purpose, without their warnings.

`BackfillPolicy.single_run()` on the cheap assets and `MultiToSingleDimensionPartitionMapping`
(a cell reads its own probe's baseline) are both marked beta in Dagster 1.13, and a partitioned
asset check (a cell's verdict and evidence seal on its own partition) is a preview; each use would
print a warning per asset and bury the board. Only those are silenced, only while the
definitions are built; any other warning still prints.
"""

import contextlib
import warnings

import dagster as dg

ON_PURPOSE = (
    r"Parameter `backfill_policy` of (function|initializer) `\w+` is currently in beta",
    r"Class `MultiToSingleDimensionPartitionMapping` is currently in beta",
)
PREVIEW_ON_PURPOSE = r"Specifying a partitions_def on an AssetCheckSpec is currently in preview"


@contextlib.contextmanager
def beta_used_on_purpose():
    with warnings.catch_warnings():
        for message in ON_PURPOSE:
            warnings.filterwarnings("ignore", message=message, category=dg.BetaWarning)
        warnings.filterwarnings("ignore", message=PREVIEW_ON_PURPOSE, category=dg.PreviewWarning)
        yield
