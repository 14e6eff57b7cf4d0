"""The harness's side of a built-in row's confined pipeline: ask, wait, take back only data.

`adapters.runner` keeps the model gateway, the scripted model and the exchange journal in the run's
process and calls `run_confined_pipeline` where it used to call the pipeline itself. The pipeline
runs in a child of the confined fork server (`adapters.confined_server`), in a scratch directory
of the sandbox's own; what it wrote there (regular files and directories only: a link it planted
is not followed) is copied to the run's working directory, where the pass criterion reads it.
"""

import logging
import os
import shutil
import stat
from pathlib import Path

from adapters.confined_pipeline import PipelineRequest, PipelineResult
from adapters.confined_server import run_in_sandbox, sandbox_environment
from sabot import plugins
from sabot.parse_rules import Protocols

PIPELINE_LOGGER = logging.getLogger("sabot.pipeline")


def pipeline_modules(frameworks) -> list[str]:
    """The built-in pipelines' modules, for the confined server to import once."""
    return [m for m in (plugins.module_of("pipeline", fw) for fw in sorted(frameworks)) if m]


def pipeline_target(framework: str) -> str:
    """The "module:Class" the harness's plug-in registry names for a built-in pipeline."""
    target = plugins.target_path("pipeline", framework)
    if target is None:
        raise plugins.PluginError(f"no pipeline named {framework!r}")
    return target


def run_confined_pipeline(spec, registry, client_endpoint, run_dir: Path) -> PipelineResult:
    models = registry.doc("standard/models.v0.1.1.json")
    request = PipelineRequest(
        framework=spec.framework,
        pipeline_target=pipeline_target(spec.framework),
        config=spec.config,
        task=spec.task,
        operator=spec.operator,
        protocol=spec.protocol,
        o4_downgrade_model=models["o4_downgrade_model"],
        client_endpoint=client_endpoint,
        protocols=Protocols.from_registry(registry),
        run_dir="",
        environ=sandbox_environment(os.environ),
    )
    answer, scratch = run_in_sandbox(request, spec.run_id, pipeline_modules([spec.framework]))
    try:
        _copy_regular(scratch, Path(run_dir))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = PipelineResult.from_json(answer)
    result.audit_sockets()
    if result.log:  # into the attempt's pipeline.log (adapters.run_attempt.pipeline_log); the terminal under --debug
        PIPELINE_LOGGER.warning("the pipeline's frameworks logged:\n%s", result.log.rstrip("\n"))
    return result


def _copy_regular(source: Path, target: Path) -> None:
    """Regular files and directories only, never following a link: what the pipeline made, as data."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            _copy_regular(Path(entry.path), target / entry.name)
        elif stat.S_ISREG(mode):
            shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)
