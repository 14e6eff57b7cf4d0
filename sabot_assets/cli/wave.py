"""`sabot wave`: run a live wave, score it, export it."""

import time
from pathlib import Path

import click

from sabot_assets.cli.common import Context, guarded, progress_bar, publish
from sabot_assets.cli.leftovers import watch_for_leftovers
from sabot_assets.cli.wave_stop import register_command, wave_stop


@click.group()
def wave():
    """Live waves: real framework runs against the model endpoint (the scripted model by default)."""


@wave.command("run")
@click.argument("name")
@click.option("--framework", "frameworks", multiple=True, help="Limit to these frameworks (repeatable).")
@click.option("--config", "configs", multiple=True, help="Limit to these configs, e.g. default (repeatable).")
@click.option("--task", "tasks", multiple=True, help="Limit to these tasks, e.g. T1 (repeatable).")
@click.option(
    "--operator",
    "operators",
    multiple=True,
    help="Limit the fault runs to these operators, e.g. O1 (repeatable); baselines still run.",
)
@click.option(
    "--seed",
    "seeds",
    type=int,
    multiple=True,
    help="Limit the runs to these seeds, e.g. 11 (repeatable): the §8 cut of seeds 5 -> 3.",
)
@click.option(
    "--rerun",
    is_flag=True,
    help="Run the selected cells again even where a matching complete run is stored (a new attempt each).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write scoreboard rows and per-cell verdicts here.",
)
@click.option(
    "--replay",
    is_flag=True,
    help="Re-execute the selected cells with every model call answered from their stored exchanges; nothing is sent to any model.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Runs in flight at once; sets the instance's llm_agent pool limit, the UI's knob (default: the current limit).",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=0),
    default=None,
    metavar="USD",
    help="Spend at most this much on the runs this command launches (never past the project's $500 cap, SPEC §8).",
)
def wave_run(name, frameworks, configs, tasks, operators, seeds, rerun, json_out, replay, concurrency, budget):
    """Run a registered live wave (e.g. `demo`) or a project folder (a team's own pipeline), score it, print it.

    A cell whose stored run is complete at the same runner version, endpoint, model ids and
    protocol (for a project folder: and the same pipeline, test double and pass-criterion code) is
    reused, not run again (unless --rerun); the cells that run again say why. Exit status 1 when
    cells ended in RUN_ERROR.
    """
    from sabot_assets.cli.targets import resolve

    resolve(name)  # a typo'd folder or wave name is refused here, before Dagster is imported or a store created
    from sabot_assets.wave_jobs import Slice
    from sabot_assets.waves.sealed_reads import once_per_command

    selection = Slice(frameworks or None, configs or None, tasks or None, operators or None, seeds or None)
    with once_per_command():  # every attempt's seal verified once, not at each of the command's reads
        guarded(_wave, Context(), name, selection, rerun, json_out, replay, concurrency, budget)


def _wave(
    ctx: Context,
    name: str,
    selection,
    rerun: bool,
    json_out: Path | None,
    replay: bool = False,
    concurrency: int | None = None,
    budget: float | None = None,
):
    from adapters.endpoint import provider_from_env
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.export import score_document
    from sabot_assets.cli.project import adopt_project, project_lines, require_priced
    from sabot_assets.cli.spend_stop import ceiling_stop_line, margined_spend, passed_ceiling
    from sabot_assets.wave_jobs import run_wave, settled_wave

    started = time.perf_counter()
    name = adopt_project(ctx, name, gate=not replay)  # a replay sends nothing to the team's code's model: no gate
    register_command(name)  # what `sabot wave stop` ends
    watch_for_leftovers()  # killed without cleaning up (kill -9 of its pid), what it started is ended anyway
    models = ctx.registry.doc("standard/models.v0.1.1.json")
    endpoint = provider_from_env(models["pipeline_model"], models["o4_downgrade_model"])
    offline = (
        "simulation (the project's own test double on 127.0.0.1)"
        if getattr(ctx.registry, "project", None)
        else "simulation (scripted model on 127.0.0.1)"
    )
    if not replay:
        require_priced(ctx, budget, endpoint.label if endpoint else offline)
    if replay:
        click.echo(f"{name}: replay: every model call is answered from the stored exchanges; no model is called")
    else:
        click.echo(f"{name}: model endpoint: {endpoint.label if endpoint else offline}")
    from sabot_assets.waves.concurrency import pool_limit, set_pool_limit

    if concurrency:  # the UI's knob is set whether or not this command launches anything
        set_pool_limit(ctx.instance(), concurrency)
    # Asked before the Dagster instance is created: with nothing stale, none is needed.
    settled = None if (rerun or replay) else settled_wave(ctx.registry, STORE_PATH, name, selection)
    if settled is not None:  # nothing is stale: no run launched, nothing materialized
        result, board_run = settled
        ceiling = None
        click.echo(
            f"{name}: nothing stale: every selected run is stored and reused, and the verdicts, scoreboard and report are "
            f"those Dagster run {board_run} made from them, under the same rules and code; nothing launched"
        )
    else:
        instance = ctx.instance()
        click.echo(
            f"{name}: up to {pool_limit(instance) or 'unbounded'} run(s) in flight, each in its own process (llm_agent pool limit)"
        )
        if not (rerun or replay):
            _say_why_stored_runs_rerun(ctx, name, selection)
        ceiling = (
            None
            if replay
            else _spend_plan(ctx, name, selection, rerun, budget, endpoint.label if endpoint else offline)
        )
        if not replay:
            _close_endpoint(ctx)
        with _live(ctx, name, endpoint is None or replay) as shown:  # a terminal: the live line replaces the block bar
            progress = iter if shown else progress_bar(f"{name}: runs and verdicts")
            result = run_wave(
                ctx.registry, ctx.defs(), instance, name, None, progress, selection, rerun, replay, ceiling
            )
    for reason in result.skipped:
        click.echo(f"  skipped {reason}")
    tally = result.tally
    click.echo(
        f"{name}: runs: {tally.ran} run, {tally.reused} reused (stored, same runner, endpoint, models and protocol"
        f"{', and same project code' if getattr(ctx.registry, 'project', None) else ''}), "
        f"{tally.carved_out} carved out; RUN_ERROR: {len(tally.run_errors)}"
    )
    wave_def = ctx.registry.wave(name)
    doc = score_document(STORE_PATH, wave_def, wave_def.headline_ruleset)
    doc["spend_margin"] = _margin(ctx.registry)
    if getattr(ctx.registry, "project", None) is not None:
        click.echo("\n".join(project_lines(STORE_PATH, wave_def, ctx.registry.project)))
    publish(doc, json_out, started)
    spent = (
        None
        if ceiling is None
        else margined_spend(STORE_PATH, endpoint.label if endpoint else offline, doc["spend_margin"] or 1.0)
    )
    if tally.stopped:
        click.echo(stop_paragraph(ctx.registry, STORE_PATH, name, selection, tally, doc["label"]), err=True)
    elif tally.not_launched:
        click.echo(ceiling_stop_line(name, ceiling, tally.not_launched, spent), err=True)
    elif spent is not None and passed_ceiling(ceiling, spent):
        click.echo(f"{name}: {passed_ceiling(ceiling, spent).removeprefix('. ')}", err=True)
    if tally.waiting:
        click.echo(
            f"{name}: the store stayed locked past the wait: {len(tally.waiting)} finished run(s) wait in the run root for ingest, "
            f"not lost; `sabot wave run {name}` ingests them once the lock is free:",
            err=True,
        )
        for path in sorted(tally.waiting):
            click.echo(f"  {path}", err=True)
    if tally.run_errors:
        click.echo(
            f"{name}: {len(tally.run_errors)} cell(s) ended in RUN_ERROR (excluded, itemized; good runs stored earlier stay scored):",
            err=True,
        )
        for key, error in sorted(tally.run_errors.items()):
            click.echo(f"  {key}: {error}", err=True)
        raise SystemExit(1)
    if tally.not_launched or tally.stopped or tally.waiting:
        raise SystemExit(1)


def _live(ctx: Context, name: str, simulated: bool):
    from sabot.pricing import PriceTable
    from sabot_assets.cli.wave_progress import live_progress
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.waves.attempts import run_root_beside

    return live_progress(
        run_root_beside(STORE_PATH),
        name,
        PriceTable.from_registry(ctx.registry),
        getattr(ctx, "runs_to_launch", None),
        simulated,
    )


def _say_why_stored_runs_rerun(ctx: Context, name: str, selection) -> None:
    """A stored run that is not reused says why: "3 cell(s) rerun: pass criterion my_checks.py changed"."""
    from sabot_assets.constants import STORE_PATH
    from sabot_assets.wave_jobs import rerun_reasons, select

    for reason, count in sorted(rerun_reasons(ctx.registry, STORE_PATH, select(ctx.registry, name, selection)).items()):
        click.echo(f"{name}: {count} cell(s) rerun: {reason}")


def _close_endpoint(ctx: Context) -> None:
    """A new `wave run` is the user's word that they acted on why the endpoint stopped (a topped-up
    quota, a provider back up): the breaker's cool-down ends now and one probe decides, the rule every
    path follows after a cool-down (adapters/gateway/limiter.py). A new key or base URL needs no word:
    it is a new circuit. A Retry-After pause still holds."""
    from adapters.run_attempt import provider_circuit

    circuit = provider_circuit(ctx.registry)
    if circuit is not None:
        circuit.reset()


def stop_paragraph(registry, store_path, name: str, selection, tally, label: str) -> str:
    """One paragraph: what failed at the provider, how many runs are missing, what produced the runs
    the board shows, the command that resumes."""
    import shlex
    import sys

    from sabot_assets.wave_jobs import missing_slots, select

    # The runs this command did not make; a slot holding a run from another endpoint (an earlier
    # scripted wave) is still missing at this one.
    missing = max(tally.not_launched, missing_slots(store_path, select(registry, name, selection)))
    command = (
        "sabot " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        if sys.argv[1:2] == ["wave"]
        else f"sabot wave run {name}"
    )
    return (
        f"{name}: the wave stopped: {tally.stopped}. No further call was sent to that endpoint; {missing} run(s) of this selection are "
        f"missing (never launched, or cut off when the endpoint stopped; none is RUN_ERROR, and every run stored earlier stays "
        f"scored; the board is labelled {label}, from the runs it holds). Once the cause is fixed, `{command}` resumes them."
    )


def _margin(registry) -> float | None:
    """The registered spend margin the board prints beside metered spend (a project without one: none)."""
    from sabot.budget import Margin
    from sabot.registry import RegistryError

    try:
        return Margin.from_registry(registry).factor
    except RegistryError:
        return None


def _spend_plan(
    ctx: Context, name: str, selection, rerun: bool, budget: float | None, endpoint_label: str
) -> float | None:
    """Project the wave's cost before any model call (refused over budget, SPEC §8) and return the
    spend ceiling its runs stop launching at."""
    from sabot_assets.constants import STORE_PATH
    from sabot.budget import usd
    from sabot_assets.waves.budget import is_simulated, pilot_worst_case, plan_spend
    from sabot_assets.wave_jobs import runs_to_launch, select

    chosen = select(ctx.registry, name, selection)
    to_launch = runs_to_launch(ctx.registry, STORE_PATH, chosen, rerun)
    ctx.runs_to_launch = len(to_launch)  # the live progress's ETA
    ceiling, projection, spent = plan_spend(
        STORE_PATH, to_launch, chosen.wave.seeds, budget, endpoint_label, ctx.registry
    )
    if projection is None:
        if ceiling is not None or to_launch:
            click.echo(
                f"{name}: {len(to_launch)} run(s) to launch"
                + ("" if ceiling is None else f"; spend ceiling {usd(ceiling)} (spent so far {usd(spent)})")
            )
    elif projection.unknown:
        click.echo(
            f"{name}: pilot: no recorded run of {', '.join(projection.unknown)} at this endpoint to project from "
            f"(the rest: {projection.line()}); the breaker alone stops launching at {usd(ceiling)}"
        )
    else:
        click.echo(
            f"{name}: projected spend {projection.line()}, within {usd(ceiling - spent)} left of the ceiling {usd(ceiling)}"
        )
    if ceiling is not None and to_launch and not is_simulated(endpoint_label):
        margin, worst = pilot_worst_case(ctx.registry)
        click.echo(
            f"{name}: each run reserves its worst case ({usd(worst * margin.factor)} margined) until it settles, so launching "
            "stops once less than that is left of the ceiling"
        )
    return ceiling


wave.add_command(wave_stop)


@wave.command("rescore")
@click.argument("name")
@click.option("--ruleset", default=None, help="Reading to print and compare (default: the wave's headline ruleset).")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write scoreboard rows and per-cell verdicts here.",
)
def wave_rescore(name, ruleset, json_out):
    """After a rule change: re-materialize cell verdicts, scoreboard and report only; print the
    board and the cells whose verdict flipped (no run and no judge call is repeated)."""
    guarded(_rescore, Context(), name, ruleset, json_out)


SHOWN_FLIPS = 200  # a larger change is summarized; --json holds every cell


def _rescore(ctx: Context, name: str, ruleset: str | None, json_out: Path | None):
    import json

    from sabot_assets.constants import STORE_PATH
    from sabot_assets.export import score_document, scoreboard_text
    from sabot_assets.rescore import rescore_wave

    started = time.perf_counter()
    result = rescore_wave(ctx.registry, ctx.defs(), ctx.instance(), STORE_PATH, name, ruleset)
    doc = score_document(STORE_PATH, result.wave, result.ruleset)
    doc["flipped"] = [{"cell": f.cell, "before": f.before, "after": f.after} for f in result.flips]
    against = (
        "its previous verdicts"
        if result.compared_with == result.ruleset
        else f"the headline {result.compared_with} (first scoring under {result.ruleset})"
    )
    if result.runs == 0:
        click.echo(
            f"{name}: nothing stale: the verdicts of {result.cells} cells under {result.ruleset}, the scoreboard and report are "
            "those the last rescore made, under the same rules and code, with nothing written since; nothing materialized"
        )
    else:
        click.echo(
            f"{name}: re-scored {result.cells} cells under {result.ruleset} in {result.runs} Dagster run(s); compared with {against}"
        )
    click.echo(scoreboard_text(doc))
    click.echo(f"flipped: {len(result.flips)} cell(s)")
    for flip in result.flips[:SHOWN_FLIPS]:
        click.echo(f"  {flip.describe()}")
    if len(result.flips) > SHOWN_FLIPS:
        click.echo(f"  ... and {len(result.flips) - SHOWN_FLIPS} more (all of them in --json)")
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
        click.echo(f"wrote {json_out}")
    click.echo(f"done in {time.perf_counter() - started:.1f} s")


@wave.command("export")
@click.argument("name")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--ruleset",
    default=None,
    help="Ruleset of the cellverdict.json files (default: the wave's headline); the bundle publishes every ruleset.",
)
@click.option(
    "--signing-key",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Ed25519 private key that signs the manifest, outside SABOT_VAR; created (0600, with KEY.pub) on first use. "
    "Default: $SABOT_SIGNING_KEY, else ~/.config/sabot/signing.key.",
)
def wave_export(name, directory, ruleset, signing_key):
    """Write a wave's bundle into DIRECTORY (new or empty): its runs and verdicts in the reference
    corpus layout under harness/runs/NAME, the registered rules, the runs' seals, the published
    verdicts, boards and reports, a manifest of every file's SHA-256 and the manifest's signature.
    The wave is verified first; `sabot verify DIRECTORY` re-derives it anywhere, with no model call.
    Publish the manifest hash and the public key (KEY.pub) it prints: they are what authenticates it."""
    from sabot_assets.cli.targets import resolve

    resolve(name)
    guarded(_export, Context(), name, directory, ruleset, signing_key)


def _export(ctx: Context, name: str, directory: Path, ruleset: str | None, signing_key: Path | None):
    from sabot import signing
    from sabot_assets.cli.project import adopt_project
    from sabot_assets.constants import STORE_PATH, VAR_DIR
    from sabot_assets.evidence_bundle import export_bundle

    key_path = signing.key_path(signing_key, VAR_DIR)
    signer = signing.load_or_create(key_path)  # before any file is written: a refused key leaves no unsigned bundle
    name = adopt_project(ctx, name)  # a project folder exports its wave, with its registered files
    exported = export_bundle(ctx.registry, STORE_PATH, name, directory, ruleset, signer=signer)
    click.echo(
        f"{name}: wrote a bundle of {exported.runs} sealed run(s) and {exported.cells} cell verdict(s) to {directory}; "
        f"manifest sha256 {exported.manifest_sha256}; signed by {exported.signed_by} (public key {signing.public_path(key_path)})"
    )
