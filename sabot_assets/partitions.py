"""Partitions of a wave: probes (baselines) and operator x probe cells (fault runs, verdicts)."""

import dagster as dg

from sabot.registry import WaveDef
from sabot_assets.quiet import beta_used_on_purpose


def probe_partitions(wave: WaveDef) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition([p.key for p in wave.probes()])


def cell_partitions(wave: WaveDef) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {"operator": dg.StaticPartitionsDefinition(list(wave.operators)), "probe": probe_partitions(wave)}
    )


# A cell reads the baseline of its own probe.
with beta_used_on_purpose():
    CELL_TO_BASELINE = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="probe")
