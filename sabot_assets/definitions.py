"""The code location: every registered wave, the store, and the rescoring sensor."""

import dagster as dg

from sabot.registry import Registry
from sabot_assets.automation import rescore_sensor
from sabot_assets.contrasts import build_contrast_assets
from sabot_assets.resources import default_store
from sabot_assets.waves.factory import build_wave


def build_definitions(registry: Registry | None = None, store=None, scorer: str | None = None) -> dg.Definitions:
    registry = registry or Registry()
    assets, checks = [], []
    for name in registry.wave_names():
        wave = registry.wave(name)
        wave_assets, wave_checks = build_wave(wave, registry, scorer)
        assets += wave_assets
        checks += wave_checks
    return dg.Definitions(
        assets=assets + build_contrast_assets(registry),
        asset_checks=checks,
        sensors=[rescore_sensor],
        resources={"store": store or default_store()},
        executor=dg.in_process_executor,  # every step is short; one process per run avoids store contention
    )


defs = build_definitions()
