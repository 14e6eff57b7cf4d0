"""`sabot compare BEFORE AFTER`: two waves of one pipeline, paired cell by cell (a CI gate)."""

from pathlib import Path

import click

from sabot_assets.cli.common import guarded


@click.command("compare")
@click.argument("before")
@click.argument("after")
@click.option(
    "--before-store",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The store holding BEFORE's verdicts (default: this project's store).",
)
@click.option(
    "--after-store",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The store holding AFTER's verdicts (default: this project's store).",
)
@click.option(
    "--fail-if-worse",
    is_flag=True,
    help="Exit status 3 when detection falls, separated at the registered alpha (overall, or an operator after Holm).",
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), help="Write the comparison here.")
@click.option(
    "--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), help="Write the paired table as a page here."
)
def compare(before, after, before_store, after_store, fail_if_worse, json_out, html_out):
    """Compare two scored waves of one pipeline (two project folders, e.g. main's and a change's, or
    one folder run on two models, each with its store; or two registered waves) on the cells both
    scored validly: per operator and overall, the paired counts and exact McNemar with Holm across
    operators, and what changed in between. Reads stored verdicts only; runs nothing."""
    from sabot_assets.cli.targets import resolve

    resolve(before)
    resolve(after)
    result = guarded(_compare, before, after, before_store, after_store, json_out, html_out)
    if fail_if_worse and result.worse:
        raise SystemExit(3)


def _compare(before, after, before_store, after_store, json_out, html_out):
    import json

    from sabot_assets.compare import Side, compare
    from sabot_assets.constants import STORE_PATH

    result = compare(Side.of(before, before_store or STORE_PATH), Side.of(after, after_store or STORE_PATH))
    click.echo("\n".join(result.lines()))
    for path, text in (
        (json_out, lambda: json.dumps(result.document(), indent=1, sort_keys=True) + "\n"),
        (html_out, lambda: _html(result)),
    ):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text())
            click.echo(f"wrote {path}")
    return result


def _html(result) -> str:
    from sabot_assets.compare_html import render

    return render(result.document())
