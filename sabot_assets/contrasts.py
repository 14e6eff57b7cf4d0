"""Paired wave-1 vs wave-2 contrasts and the pre-registered predictions P1-P5, one asset per pair.

Each pair reads the stored cell verdicts of both waves (their headline rulesets) and evaluates the
predictions with exact McNemar tests, Holm inside each family, and task-cluster bootstraps.
"""

import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.tables import fmt_rate, markdown_table
from judges.stats import evaluate_predictions
from sabot.registry import Registry
from sabot.store.board import read_report, write_report
from sabot.store.verdicts import read_verdicts
from sabot_assets.automation import REBUILD_BOARD
from sabot_assets.constants import COST_TAG
from sabot_assets.resources import store_connection

CONTRASTS_DOC = "standard/contrasts.v1.json"


def replans_table(first: str, second: str, boards: dict) -> list[str]:
    """Clean-run stall re-plans, wave 1 prompts vs wave 2 prompts, on the same probes."""
    groups = sorted(set(boards[first].get("baseline_replans", {})) | set(boards[second].get("baseline_replans", {})))
    rows = [[g] + [fmt_rate(*boards[w].get("baseline_replans", {}).get(g, [0, 0])) for w in (first, second)] for g in groups]
    return ["## Clean-run Magentic-One stall re-plans, by wave protocol", "", markdown_table(["group", first, second], rows), ""]


def predictions_markdown(pair: dict, results, boards: dict | None = None) -> str:
    rows = [[r.id, r.status, r.statement, r.evidence] for r in results]
    replans = replans_table(pair["first"], pair["second"], boards) if boards else []
    return "\n".join([
        f"# Pre-registered predictions — {pair['first']} vs {pair['second']} ({pair['label']})",
        "",
        "Paired on cells valid in both waves; exact McNemar, Holm within each prediction's family. "
        "`undetermined` means the data do not separate, or the cells are not there.",
        "",
        markdown_table(["prediction", "status", "statement", "evidence"], rows),
        "",
        *replans,
    ])


def build_contrast_assets(registry: Registry) -> list[dg.AssetsDefinition]:
    assets, waves = [], set(registry.wave_names())
    for pair in registry.field(CONTRASTS_DOC, "pairs"):
        if not {pair["first"], pair["second"]} <= waves:
            continue
        assets.append(_build_pair(registry, pair))
    return assets


def _build_pair(registry: Registry, pair: dict) -> dg.AssetsDefinition:
    first, second = registry.wave(pair["first"]), registry.wave(pair["second"])

    @dg.asset(
        name="predictions",
        key_prefix=pair["name"],
        group_name="contrasts",
        deps=[dg.AssetKey([first.name, "cell_verdicts"]), dg.AssetKey([second.name, "cell_verdicts"])],
        code_version=f"predictions-v1+{registry.files[CONTRASTS_DOC].sha256[:12]}",
        automation_condition=REBUILD_BOARD,
        tags={COST_TAG: "cheap"},
        kinds={"duckdb"},
        description=f"P1-P5 and the paired contrasts, {first.name} vs {second.name}.",
    )
    def predictions(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        with store_connection(store) as con:
            rows1 = read_verdicts(con, first.name, first.headline_ruleset)
            rows2 = read_verdicts(con, second.name, second.headline_ruleset)
            results = evaluate_predictions(rows1, rows2)
            boards = {w.name: json.loads(read_report(con, w.name, w.headline_ruleset, "board.json") or "{}") for w in (first, second)}
            body = predictions_markdown(pair, results, boards)
            write_report(con, pair["name"], "predictions", "md", body, context.run_id)
            doc = [{"id": r.id, "status": r.status, "statement": r.statement, "evidence": r.evidence} for r in results]
            write_report(con, pair["name"], "predictions", "json", json.dumps(doc), context.run_id)
        path = Path(store.database).parent / "reports" / pair["name"] / "predictions.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        return dg.MaterializeResult(metadata={"predictions": dg.MetadataValue.md(body), **{r.id: r.status for r in results}})

    return predictions
