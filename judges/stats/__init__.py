"""Statistics for Sabot reports: Wilson rates, task-cluster bootstrap, exact paired contrasts with
Holm families, Cohen's kappa for the double-judged set, and the §10.8 prediction verdicts.

Library-backed (statsmodels, numpy); each function's docstring names what backs it.
"""

from judges.stats.contrasts import (
    Contrast,
    holm,
    holm_contrasts,
    mcnemar_exact,
    newcombe_paired_ci,
    paired_cells,
    paired_rows,
)
from judges.stats.intervals import (
    BootstrapCI,
    Rate,
    ReplicateCI,
    cluster_bootstrap,
    rate_with_ci,
    replicate_bootstrap,
    wilson,
)
from judges.stats.kappa import Kappa, cohen_kappa, kappa_confidence
from judges.stats.predictions import PredictionResult, evaluate_predictions

__all__ = [
    "BootstrapCI",
    "Contrast",
    "Kappa",
    "PredictionResult",
    "Rate",
    "ReplicateCI",
    "cluster_bootstrap",
    "cohen_kappa",
    "evaluate_predictions",
    "holm",
    "holm_contrasts",
    "kappa_confidence",
    "mcnemar_exact",
    "newcombe_paired_ci",
    "paired_cells",
    "paired_rows",
    "rate_with_ci",
    "replicate_bootstrap",
    "wilson",
]
