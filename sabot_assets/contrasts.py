"""Paired wave-1 vs wave-2 contrasts and the pre-registered predictions P1-P5, one asset per pair.

Each pair reads the stored cell verdicts of both waves (their headline rulesets) and evaluates the
predictions with exact McNemar tests, Holm inside each family, and task-cluster bootstraps.
"""

import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.hard.funnel import with_soft
from judges.hard.rulesets import load_ruleset
from judges.hard.strict import clean_fires
from judges.hard.tables import fmt_rate, markdown_table
from judges.labels import registered_label
from sabot.provenance import is_simulated
from sabot.registry import Registry
from sabot.store.published import read_report, write_report
from sabot_assets.waves.judging import located_judgements
from sabot.store.runs import read_baselines
from sabot.store.verdicts import read_verdicts
from sabot_assets.automation import REBUILD_BOARD
from sabot_assets.constants import COST_TAG
from sabot_assets.resources import store_connection

CONTRASTS_DOC = "standard/contrasts.v1.json"
READINGS_DOC = "standard/predictions.v2.json"


def replans_table(first: str, second: str, boards: dict) -> list[str]:
    """Clean-run stall re-plans, wave 1 prompts vs wave 2 prompts, on the same probes."""
    groups = sorted(set(boards[first].get("baseline_replans", {})) | set(boards[second].get("baseline_replans", {})))
    rows = [
        [g] + [fmt_rate(*boards[w].get("baseline_replans", {}).get(g, [0, 0])) for w in (first, second)] for g in groups
    ]
    return [
        "## Clean-run Magentic-One stall re-plans, by wave protocol",
        "",
        markdown_table(["group", first, second], rows),
        "",
    ]


def predictions_markdown(pair: dict, results, boards: dict | None = None) -> str:
    rows = [
        [r.id, f"{r.status} ({registered_label(r.registered)})" if r.registered else r.status, r.statement, r.evidence]
        for r in results
    ]
    readings = [[r.id, r.reading or "—", registered_label(r.registered) if r.registered else "—"] for r in results]
    replans = replans_table(pair["first"], pair["second"], boards) if boards else []
    simulated = is_simulated(pair["label"])
    return "\n".join(
        [
            f"# Pre-registered predictions — {pair['first']} vs {pair['second']} ({pair['label']})",
            "",
            *(
                [
                    "**Simulation: no prediction verdict.** The scripted model's rates are set by hand, so a prediction "
                    "cannot hold or fail on them; the contrasts are shown as an instrument check only.",
                    "",
                ]
                if simulated
                else []
            ),
            "Each prediction is read as §10.8 words it: P1 and P4 compare wave1_mapping with the union on the same "
            "wave-2 cells; P2 and P5 pair cells valid in both waves; P5's recovery-without-detection is §2's (neither "
            "hard nor soft). Exact McNemar, Holm within each prediction's family. `undetermined` means the data do "
            "not separate, or the cells are not there.",
            "",
            markdown_table(["prediction", "status", "statement", "evidence"], rows),
            "",
            "## Our readings (where the words leave a choice), with the date we registered them",
            "",
            markdown_table(["prediction", "our reading", "registered"], readings),
            "",
            *replans,
        ]
    )


def judged(con, wave: str) -> dict:
    """(operator, probe) -> the first judge verdict (variant 0), for §2's soft reading."""
    return located_judgements(con, wave)


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
        deps=[dg.AssetKey([w.name, name]) for w in (first, second) for name in ("cell_verdicts", "judge_verdicts")],
        code_version=f"predictions-v3+{registry.files[CONTRASTS_DOC].sha256[:12]}+{registry.files[READINGS_DOC].sha256[:12]}",
        automation_condition=REBUILD_BOARD,
        tags={COST_TAG: "cheap"},
        kinds={"duckdb"},
        description=f"P1-P5 and the paired contrasts, {first.name} vs {second.name}.",
    )
    def predictions(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        from judges.stats import (
            evaluate_predictions,
        )  # numpy: imported when predictions compute, not with the definitions

        with store_connection(store) as con:
            rows1, rows2 = (
                with_soft(read_verdicts(con, w.name, w.headline_ruleset), judged(con, w.name)) for w in (first, second)
            )
            # P1 and P4's clean-baseline term: the second wave's anchors on each cell's own clean baseline.
            fires = clean_fires(load_ruleset(registry, second.headline_ruleset), read_baselines(con, second.name))
            rows2 = [{**r, "clean_fire": fires.get((r["probe"], r["operator"]))} for r in rows2]
            results = evaluate_predictions(
                rows1,
                rows2,
                registry.doc(READINGS_DOC),
                simulated=is_simulated(pair["label"]),
                expected=(first.cell_keys(), second.cell_keys()),
            )
            boards = {
                w.name: json.loads(read_report(con, w.name, w.headline_ruleset, "board.json") or "{}")
                for w in (first, second)
            }
            body = predictions_markdown(pair, results, boards)
            write_report(con, pair["name"], "predictions", "md", body, context.run_id)
            doc = [
                {
                    "id": r.id,
                    "status": r.status,
                    "statement": r.statement,
                    "evidence": r.evidence,
                    "reading": r.reading,
                    "registered": r.registered,
                    "registered_label": registered_label(r.registered) if r.registered else None,
                }
                for r in results
            ]
            write_report(con, pair["name"], "predictions", "json", json.dumps(doc), context.run_id)
        path = Path(store.database).parent / "reports" / pair["name"] / "predictions.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        return dg.MaterializeResult(
            metadata={"predictions": dg.MetadataValue.md(body), **{r.id: r.status for r in results}}
        )

    return predictions
