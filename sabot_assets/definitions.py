"""The code location: every registered wave, the store, and the rescoring sensor.

`defs` is lazy (`@dg.definitions`): importing this module builds nothing, creates nothing under
`var/` and imports no agent framework; a framework is imported only when a run executes.
"""

import dagster as dg

from sabot.registry import Registry
from sabot_assets.automation import rescore_sensor
from sabot_assets.contrasts import build_contrast_assets
from sabot_assets.guard import guard_assets
from sabot_assets.hosts import run_executor
from sabot_assets.quiet import beta_used_on_purpose
from sabot_assets.resources import default_store
from sabot_assets.waves.factory import build_wave


def build_definitions(registry: Registry | None = None, store=None, scorer: str | None = None) -> dg.Definitions:
    registry = registry or Registry()
    store = store or default_store()
    assets, checks, jobs = [], [], []
    with beta_used_on_purpose():
        for name in registry.wave_names():
            built = build_wave(registry.wave(name), registry, scorer)
            assets += built.assets
            checks += built.checks
            jobs += built.jobs
        contrasts = build_contrast_assets(registry)
    return dg.Definitions(
        assets=guard_assets(assets + contrasts, registry, store),  # every asset refuses an edited registry
        asset_checks=checks,
        jobs=jobs,
        sensors=[rescore_sensor],
        resources={"store": store},
        executor=run_executor(),  # in-process on one machine; the worker hosts' where the deployment has them
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
