"""`<wave>/instrument_check` (live waves): the scorer's stored verdicts against the simulator's intent log.

A simulated wave measures the instrument. This asset runs after scoring, reads what the scorer
wrote and what the scripted model logged, and stores the agreement per operator and row with every
disagreement (`judges.instrument`). Against a real provider there is no intent log: it says so.
"""

import json

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.instrument import agreement
from judges.instrument.report import agreement_markdown
from sabot.registry import WaveDef
from sabot.store.published import write_report
from sabot.store.instrument import read_intents, read_wave_acts
from sabot.store.verdicts import read_verdicts
from sabot_assets.automation import REBUILD_BOARD
from sabot_assets.constants import COST_TAG
from sabot_assets.resources import store_connection
from sabot_assets.waves.scoreboard_assets import report_link, reports_dir
from sabot_assets.waves.ui_text import summary


def build_instrument_check(wave: WaveDef, rulesets, verdicts: list[dg.AssetKey], scorer: str) -> dg.AssetsDefinition:
    @dg.asset(
        name="instrument_check",
        key_prefix=wave.name,
        group_name=wave.name,
        deps=verdicts,
        code_version=f"instrument-v1+{scorer}",
        automation_condition=REBUILD_BOARD,
        tags={COST_TAG: "cheap"},
        kinds={"duckdb"},
        description="Simulation as an instrument check: detection, reaction and recovery agreement between the "
        "stored verdicts and the scripted model's intent log, per operator and row, disagreements listed.",
    )
    def instrument_check(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        docs = {}
        with store_connection(store) as con:
            intents = read_intents(con, wave.name)
            for ruleset in (
                rulesets if intents else ()
            ):  # no intent log (a provider, a team's test double): nothing to agree with
                rows = read_verdicts(con, wave.name, ruleset.version)
                docs[ruleset.version] = agreement(
                    rows, intents, read_wave_acts(con, wave.name, ruleset.version), ruleset
                )
            body = (
                agreement_markdown(wave.name, docs, wave.headline_ruleset)
                if intents
                else f"{wave.name}: no intent log (no scripted model of ours answered this wave): no instrument check."
            )
            write_report(con, wave.name, "instrument", "json", json.dumps(docs, sort_keys=True), context.run_id)
            write_report(con, wave.name, "instrument", "md", body, context.run_id)
        if not docs:
            return dg.MaterializeResult(metadata={"instrument check": dg.MetadataValue.md(body)})
        path = reports_dir(store) / wave.name / "instrument_check.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        link = report_link(store, path)
        head = docs[wave.headline_ruleset]["total"]
        return dg.MaterializeResult(
            metadata={
                "detection agreement": f"{head['detection']['agree']} agree, {head['detection']['disagree']} disagree",
                "disagreements": len(docs[wave.headline_ruleset]["disagreements"]),
                "instrument check (full)": link,
                "instrument check": dg.MetadataValue.md(summary(body, f"[the full instrument check]({link.value})")),
            }
        )

    return instrument_check
