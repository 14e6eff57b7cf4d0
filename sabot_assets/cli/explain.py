"""`sabot explain`: walk a published number back to its cells, acts, events and model exchanges."""

import json

import click

from sabot_assets.cli.common import Context
from sabot_assets.waves.ui_text import shortened


@click.command("explain")
@click.argument("wave_name")
@click.argument("table", required=False)
@click.argument("row", required=False)
@click.argument("column", required=False)
@click.option("--ruleset", default=None, help="Default: the wave's headline ruleset.")
@click.option("--cell", "cell_key", default=None, help="Drill into one cell, e.g. 'O1|langgraph.default.T1.s11'.")
@click.option(
    "--full", is_flag=True, help="Print event payloads and model exchanges whole (default: shortened, marked)."
)
def explain(wave_name, table, row, column, ruleset, cell_key, full):
    """Trace a published number (TABLE ROW COLUMN, e.g. framework_config langgraph/default DETECTED_HARD)
    to its cells; with --cell, a cell to its acts, events and model exchanges (the number may be left out)."""
    from sabot.store.db import connect
    from sabot.store.lineage import cell_detail, number_cells
    from sabot_assets.constants import STORE_PATH

    from sabot_assets.cli.project import adopt_project

    number = (table, row, column)
    if any(number) and not all(number):
        raise click.UsageError(
            "a number is TABLE ROW COLUMN, all three (e.g. framework_config langgraph/default DETECTED_HARD)"
        )
    if not any(number) and not cell_key:
        raise click.UsageError("name a number (TABLE ROW COLUMN), a cell (--cell KEY), or both")
    from sabot_assets.cli.targets import resolve

    resolve(wave_name)
    ctx = Context()
    name = adopt_project(ctx, wave_name)
    wave = ctx.registry.wave(name)
    ruleset = ruleset or wave.headline_ruleset
    try:
        with connect(STORE_PATH, read_only=True) as con:
            numerator, denominator = number_cells(con, wave.name, ruleset, table, row, column) if table else ([], [])
            detail = cell_detail(con, wave.name, ruleset, *cell_key.split("|", 1)) if cell_key else None
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if table:
        _echo_number(wave.name, ruleset, number, numerator, denominator)
    if detail:
        _echo_cell(cell_key, detail, full)


def _echo_number(wave: str, ruleset: str, number: tuple, numerator: list, denominator: list) -> None:
    rate = f"{100 * len(numerator) / len(denominator):.1f}%" if denominator else "n/a"
    click.echo(f"{wave} / {ruleset} / {' / '.join(number)}: {rate} ({len(numerator)}/{len(denominator)})")
    for name, cells in (("numerator", numerator), ("denominator", denominator)):
        click.echo(f"{name}: {len(cells)} cells")
        for c in cells:
            attempt = f"  attempt {c['fault_attempt']}" if c["fault_attempt"] is not None else ""
            click.echo(
                f"  {c['operator']}|{c['probe']}  run {c['fault_run_id']}{attempt}  sha256 {(c['fault_sha256'] or '')[:12]}  baseline {c['baseline_run_id']}"
            )


def _echo_cell(cell_key: str, detail: dict, full: bool) -> None:
    def clip(value, limit: int) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if full else shortened(text, limit, "--full prints all of it")

    click.echo(f"cell {cell_key}: {json.dumps(detail['verdict'], default=str)}")
    if detail["verdict"]["fault_attempt"] is not None:
        click.echo(f"  the verdict read attempt {detail['verdict']['fault_attempt']} of the fault run")
    for a in detail["attempts"]:
        click.echo(
            f"  attempt {a['attempt']}: {a['outcome']} at {a['finished_at']} against {a['endpoint']} ({a['runner_version']}), {a['source_path']}"
            + (f": {a['error']}" if a["error"] else "")
        )
        if a.get("exchanges"):  # an attempt that never completed (killed, cut off): the calls it was answered, all paid
            click.echo(f"    model exchanges kept by attempt {a['attempt']}: {len(a['exchanges'])}")
            for x in a["exchanges"]:
                click.echo(
                    f"      #{x.get('n')} {x.get('model')}: {clip((x.get('request') or {}).get('messages', [])[-1:], 200)} -> {clip(x.get('reply'), 200)}"
                )
    for a in detail["acts"]:
        counted = "counted" if a["counted"] else "not counted: " + a["note"]
        click.echo(f"  act seq {a['seq']}: {a['act']} by {a['component']} ({a['surface']}, {counted}): {a['reason']}")
    for e in detail["events"]:
        click.echo(f"  event seq {e['seq']}: {e['agent']} {e['kind']} {clip(e['payload'], 300)}")
    click.echo(
        f"  model exchanges recorded: {len(detail['exchanges'])}"
        + ("" if detail["exchanges"] else " (imported corpora carry none)")
    )
    for x in detail["exchanges"]:
        click.echo(
            f"    #{x['n']} {x['model']}: {clip(x['request'].get('messages', [])[-1:], 200)} -> {clip(x['reply'], 200)}"
        )


@click.command("predictions")
@click.argument("pair")
def predictions(pair):
    """Evaluate P1-P5 for a registered wave pair (e.g. live_contrasts) from the stored verdicts."""
    import dagster as dg

    ctx = Context()
    defs = ctx.defs()
    key = dg.AssetKey([pair, "predictions"])
    assets = [a for a in defs.assets if key in a.keys]
    if not assets:
        raise click.ClickException(f"no pair {pair!r}; see data/standard/contrasts.v1.json")
    from sabot_assets.materialize import quiet

    result = dg.materialize(
        defs.assets,
        selection=[key],
        instance=ctx.instance(),
        resources=defs.resources,
        run_config=quiet(),
        raise_on_error=False,
    )
    if not result.success:
        from sabot_assets.materialize import own_cause

        failure = next((e for e in result.all_events if e.is_step_failure), None)
        cause = (
            own_cause(failure.step_failure_data.error)
            if failure is not None and failure.step_failure_data.error
            else "see the Dagster run log"
        )
        raise click.ClickException(f"{pair}: evaluating the predictions failed (run {result.run_id}): {cause}")
    click.echo(result.asset_materializations_for_node(f"{pair}__predictions")[0].metadata["predictions"].value)
