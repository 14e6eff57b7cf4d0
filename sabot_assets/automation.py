"""Automation: only the cheap deterministic layer is ever re-run by itself.

Run assets carry no automation condition, so a model call is never repeated because a scorer
changed. Cell verdicts re-run when their inputs update or their code version (the rulesets'
hash) changes; the scoreboard and report follow. Partial waves are normal, so the unpartitioned
assets do not wait for every upstream partition.
"""

import dagster as dg

from sabot_assets.constants import COST_TAG

RESCORE_CELLS = dg.AutomationCondition.eager() | (
    dg.AutomationCondition.code_version_changed()
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.in_progress()
)

# A later reading spans every cell of the wave, as the board does: it follows its inputs without
# waiting for every cell (partial waves are normal), and a new reading's partition is made.
RESCORE_READINGS = (
    (
        dg.AutomationCondition.missing()
        | dg.AutomationCondition.any_deps_updated()
        | dg.AutomationCondition.code_version_changed()
    ).since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)

REBUILD_BOARD = (
    (dg.AutomationCondition.any_deps_updated() | dg.AutomationCondition.code_version_changed()).since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)

rescore_sensor = dg.AutomationConditionSensorDefinition(
    "rescore",
    target=dg.AssetSelection.tag(COST_TAG, "cheap"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Re-scores cell verdicts, scoreboards and reports when a rule or an input changes. Never targets run assets.",
)
