"""Pre-registration: what a wave was registered with, and a blocking check that it still holds.

Registering a wave also records its carved-out cells (SPEC v0.2.1 §10.6) on `fault_runs` as
materialized and carved out, so from the start the UI shows them as what they are, never as
missing work.
"""

import dagster as dg

from sabot.matrix import Cell
from sabot.registry import Registry, WaveDef
from sabot_assets.constants import PREREGISTRATION_VERSION
from sabot_assets.waves.cell_metadata import carved_out_metadata


def build_preregistration(
    wave: WaveDef, registry: Registry, rulesets
) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition]:
    @dg.asset(
        name="preregistration",
        key_prefix=wave.name,
        group_name=wave.name,
        code_version=PREREGISTRATION_VERSION,
        description=(
            f"The registered matrix, seeds and rulesets of {wave.name}, pinned to the registry hash. "
            "Materializing it records the carved-out cells on fault_runs as carved out."
        ),
    )
    def preregistration(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        probes = wave.probes()
        cells = len(probes) * len(wave.operators)
        carved = [Cell(op, p) for p in probes for op in wave.operators if wave.is_carved_out(Cell(op, p))]
        fault_runs = dg.AssetKey([wave.name, "fault_runs"])
        recorded = context.instance.get_materialized_partitions(fault_runs) if carved else set()
        for cell in carved:
            if cell.key not in recorded:  # once: registering again adds nothing
                context.log_event(
                    dg.AssetMaterialization(fault_runs, partition=cell.key, metadata=carved_out_metadata(wave, cell))
                )
        return dg.MaterializeResult(
            metadata={
                "registry sha256": registry.content_hash,
                "source": wave.source,
                "label": wave.label,
                "seeds": str(list(wave.seeds)),
                "probes (baselines)": len(probes),
                "cells": cells,
                "carved-out cells": len(carved),
                "headline ruleset": wave.headline_ruleset,
                "rulesets": dg.MetadataValue.md("\n".join(f"- {r.version}: `{r.hash}`" for r in rulesets)),
            }
        )

    @dg.asset_check(
        asset=preregistration, blocking=True, description="The registry on disk still hashes to what was registered."
    )
    def registry_matches_registration() -> dg.AssetCheckResult:
        problems = registry.fresh().lock_problems()
        return dg.AssetCheckResult(
            passed=not problems,
            metadata={"problems": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems) or "none")},
        )

    return preregistration, registry_matches_registration
