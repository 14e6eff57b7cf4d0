"""Per-cell asset checks: a cell's verdict and its evidence seal, on its own `cell_verdicts`
partition, in Dagster's own check view.

Dagster 1.13 can partition an asset check (`AssetCheckSpec(partitions_def=...)`, a preview
feature); an `AssetCheckResult` still evaluates only the step's single partition key, and a
cell_verdicts run scores a range of cells. So the step records one `AssetCheckEvaluation` per cell
and check, with its partition (`context.log_event`, the public event API), and then the check's
output, which Dagster expects from the step whenever the check is selected.

- `verdict`: the cell has a verdict (valid, or an itemized exclusion); fails (WARN) when an input
  is missing, naming it. The description is the verdict and the §2 outcome.
- `evidence_seal` (live waves): the fault run the verdict read still matches its seal under the
  store's key, and its record hashes to what the verdict recorded; fails (ERROR) naming the file.
  An imported corpus has no seal (its files' hashes are recorded at import), so it has no such check.
"""

from pathlib import Path

import dagster as dg

from sabot import runroot
from sabot.seal import SealError
from sabot.trace import TraceError
from sabot.registry import WaveDef
from sabot_assets.file_server.addresses import attempt_dir_of
from sabot_assets.quiet import beta_used_on_purpose

VERDICT_CHECK, SEAL_CHECK = "verdict", "evidence_seal"


def check_specs(wave: WaveDef, asset: dg.AssetKey, partitions_def) -> list[dg.AssetCheckSpec]:
    with beta_used_on_purpose():  # a partitioned check is a preview in Dagster 1.13: used knowingly
        return _specs(wave, asset, partitions_def)


def _specs(wave: WaveDef, asset: dg.AssetKey, partitions_def) -> list[dg.AssetCheckSpec]:
    specs = [
        dg.AssetCheckSpec(
            VERDICT_CHECK,
            asset=asset,
            partitions_def=partitions_def,
            description="Per cell: a verdict under the headline ruleset (valid, or an itemized exclusion), with its §2 outcome.",
        )
    ]
    if wave.source == "live":
        specs.append(
            dg.AssetCheckSpec(
                SEAL_CHECK,
                asset=asset,
                partitions_def=partitions_def,
                description="Per cell: the fault run the verdict read still matches its seal, and hashes to what the verdict recorded.",
            )
        )
    return specs


def verdict_evaluation(asset: dg.AssetKey, key: str, head: dict, verdict: str, outcome: str) -> dg.AssetCheckEvaluation:
    complete = head["status"] != "incomplete"
    return dg.AssetCheckEvaluation(
        asset_key=asset,
        check_name=VERDICT_CHECK,
        partition=key,
        passed=complete,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{verdict}; §2 outcome: {outcome}" if complete else verdict,
        metadata={"verdict": verdict, "§2 outcome": outcome, "ruleset": head["ruleset"]},
    )


def seal_evaluation(
    asset: dg.AssetKey, key: str, run_root: Path, head: dict, source_path: str | None
) -> dg.AssetCheckEvaluation:
    def result(passed: bool, description: str) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(
            asset_key=asset,
            check_name=SEAL_CHECK,
            partition=key,
            passed=passed,
            description=description,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"record": source_path or "none", "record sha256 read": head["fault_sha256"] or "none"},
        )

    if not source_path or not head["fault_sha256"]:
        return result(False, "no fault run stored for this cell: nothing to check against a seal")
    try:
        attempt = runroot.read_attempt(run_root, run_root / attempt_dir_of(source_path))
    except (SealError, TraceError, OSError) as exc:
        return result(False, str(exc))
    if attempt.sha256 != head["fault_sha256"]:
        return result(
            False,
            f"{source_path}: sealed record sha256 {attempt.sha256[:12]}, the verdict read {head['fault_sha256'][:12]}",
        )
    return result(True, f"sealed, and the verdict read this record ({source_path}, sha256 {attempt.sha256[:12]})")


def check_outputs(context: dg.AssetExecutionContext):
    """The outputs of the selected checks: their evaluations were logged per partition."""
    for check_key in context.selected_asset_check_keys:
        yield dg.Output(None, output_name=context.assets_def.get_output_name_for_asset_check_key(check_key))
