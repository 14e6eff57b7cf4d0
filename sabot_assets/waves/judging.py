"""The soft tier: judge verdicts per cell, and the kappa audit with its blocking check.

An imported wave's verdicts are the reference corpus's cached judgeverdict files (no model call).
A live wave is judged by the backend named in SABOT_JUDGE: `offline` (default, deterministic,
labelled simulation), `claude` (headless CLI, sandbox probe before each batch) or `openai`
(SABOT_JUDGE_BASE_URL, SABOT_JUDGE_API_KEY, SABOT_JUDGE_MODEL). The headline never depends on any
of this: the scoreboard reads judge verdicts only for the soft-tier columns.

What may run by itself: cached reference verdicts and the offline judge make no model call, so
they are re-judged by the `rescore` sensor when their cells' runs update (a partial wave leaves no
cell unjudged); a paid judge (`claude`, `openai`) runs only when someone launches it. The kappa
audit re-runs whenever the judge verdicts it reads update.
"""

import json
import os

import dagster as dg
from dagster_duckdb import DuckDBResource

from judges.soft.batch import judge_batch
from judges.soft.cache import load_reference_verdict
from judges.soft.location import located
from judges.soft.rubric import RUBRIC_REL
from judges.soft.subset import double_judged
from sabot import tasks
from sabot.matrix import Cell
from sabot.registry import Registry, WaveDef
from sabot.store.published import read_report, write_report
from sabot.store.db import transaction
from sabot.store.judging import read_judgements, write_judgements
from sabot.store.runs import read_runs, read_scored_runs
from sabot_assets.automation import REBUILD_BOARD, RESCORE_CELLS
from sabot_assets.constants import COST_TAG
from sabot_assets.partitions import cell_partitions
from sabot_assets.resources import store_connection
from sabot_assets.waves.cell_metadata import add_partition_metadata, judgement_metadata

VARIANT_FILES = {"judgeverdict": 0, "judgeverdict-variant1": 1}
FREE_JUDGES = ("offline",)  # backends that call no model: safe to run by automation


def judge_choice() -> str:
    return os.environ.get("SABOT_JUDGE", "offline")


def judge_runs_by_itself(wave: WaveDef) -> bool:
    """Cached verdicts (an import) or a judge that calls no model: automation may re-judge."""
    return wave.source == "import" or judge_choice() in FREE_JUDGES


def backend_from_env():
    choice = judge_choice()
    if choice == "offline":
        from judges.soft.backends.offline import OfflineJudge

        return OfflineJudge()
    if choice == "claude":
        from judges.soft.backends.claude_cli import ClaudeCliJudge

        return ClaudeCliJudge()
    if choice == "openai":
        from judges.soft.backends.openai_compat import OpenAICompatibleJudge

        env = os.environ
        return OpenAICompatibleJudge(
            env["SABOT_JUDGE_BASE_URL"], env["SABOT_JUDGE_API_KEY"], env["SABOT_JUDGE_MODEL"], timeout=120
        )
    raise ValueError(f"SABOT_JUDGE={choice!r}: expected offline, claude or openai")


def located_judgements(con, wave: str) -> dict:
    """(operator, probe) -> the first judge verdict (variant 0), with where its quote was written
    (`judges.soft.location`): only noticed verdicts need their fault run read."""
    judged = judged_verdicts(con, wave)
    where = quote_locations(con, wave, judged)
    return {key: {**v, "quote_location": where[key]} for key, v in judged.items()}


def judged_verdicts(con, wave: str) -> dict:
    """(operator, probe) -> the first judge verdict (variant 0)."""
    return {(op, probe): v for (op, probe, variant), v in read_judgements(con, wave, variant=0).items()}


def quote_locations(con, wave: str, judged: dict) -> dict:
    """(operator, probe) -> where the verdict's quote was written, reading the noticed verdicts' fault runs."""
    noticed = [key for key, v in judged.items() if v["status"] == "ok" and v["noticed"]]
    located = located_from_runs(judged, read_scored_runs(con, wave, noticed))
    return {key: v["quote_location"] for key, v in located.items()}


def located_from_runs(judged: dict, runs: dict) -> dict:
    """Judge verdicts with where each quote was written, from the runs at hand (the store's, or a
    bundle's for `sabot verify`): the boards count a notice quoted from before the injection apart."""
    records = {key: run.record for key, run in runs.items() if run.record is not None and key in judged}
    return located(judged, records)


def _row(wave: str, cell: Cell, verdict, run_id: str) -> dict:
    return {
        "wave": wave,
        "operator": cell.operator,
        "probe": cell.probe.key,
        "prompt_variant": verdict.prompt_variant,
        "backend": verdict.backend,
        "backend_version": verdict.backend_version,
        "status": verdict.status,
        "noticed": verdict.noticed,
        "by_which_component": verdict.by_which_component,
        "evidence_quote": verdict.evidence_quote,
        "raw": verdict.raw,
        "attempts": verdict.attempts,
        "reason": verdict.reason,
        "source": verdict.source,
        "dagster_run_id": run_id,
    }


def _cached(con, wave: WaveDef, cells: list[Cell], run_id: str) -> list[dict]:
    keys = {(c.operator, c.probe.key): c for c in cells}
    rows = con.execute(
        "SELECT kind, operator, probe, rel_path, body FROM corpus_files WHERE wave = ? AND kind IN ('judgeverdict', 'judgeverdict-variant1')",
        [wave.name],
    ).fetchall()
    out = []
    for _kind, op, probe, path, body in rows:
        if (op, probe) in keys:
            verdict = load_reference_verdict(json.loads(body), path)
            out.append(_row(wave.name, keys[(op, probe)], verdict, run_id))
    return out


def _work(con, wave: WaveDef, cells: list[Cell], unjudged: dict) -> list[tuple]:
    """(cell, run record, ground-truth note, prompt variant) for every judgement a live wave needs;
    `unjudged` gets why each other cell has nothing to judge."""
    runs = read_runs(con, wave.name, [(c.operator, c.probe.key) for c in cells])
    work = []
    for cell in cells:
        stored = runs.get((cell.operator, cell.probe.key))
        if stored is None or stored.record is None or stored.record.error:
            unjudged[cell.key] = (
                "no fault run stored yet"
                if stored is None or stored.record is None
                else "the fault run ended in RUN_ERROR: nothing to judge"
            )
            continue
        note = tasks.oracle(cell.probe.task).operators[cell.operator][
            "ground_truth"
        ]  # the judge, not the pipeline, sees it
        variants = (0, 1) if double_judged(wave.name, cell.operator, cell.probe.key) else (0,)
        work += [(cell, stored.record, note, v) for v in variants]
    return work


def _judged(work: list[tuple], wave: WaveDef, run_id: str) -> list[dict]:
    verdicts = judge_batch(backend_from_env(), [(record, note, v) for _, record, note, v in work]) if work else []
    return [_row(wave.name, cell, verdict, run_id) for (cell, *_), verdict in zip(work, verdicts)]


def build_judging_assets(wave: WaveDef, registry: Registry, fault_runs: dg.AssetKey) -> tuple[list, list]:
    rubric_sha = registry.files[RUBRIC_REL].sha256[:12]
    automatic = judge_runs_by_itself(wave)
    when = (
        "Re-judged by the rescore sensor when a cell's run updates (no model call)."
        if automatic
        else f"A paid judge ({judge_choice()}): runs only when launched (Materialize the cells); never by automation."
    )

    @dg.asset(
        name="judge_verdicts",
        key_prefix=wave.name,
        group_name=wave.name,
        partitions_def=cell_partitions(wave),
        backfill_policy=dg.BackfillPolicy.single_run(),
        deps=[fault_runs],
        code_version=f"judge-v2+{rubric_sha}+{judge_choice()}"
        if wave.source == "live"
        else f"judge-cache-v1+{rubric_sha}",
        automation_condition=RESCORE_CELLS if automatic else None,
        kinds={"duckdb"},
        tags={COST_TAG: "cheap" if automatic else "judge"},
        description=(
            "Soft-tier judge verdicts per cell (cached reference verdicts for an imported wave). Open a partition for "
            f"that cell's verdict: noticed, the component, the evidence quote, per prompt variant. {when}"
        ),
    )
    def judge_verdicts(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        all_cells = [Cell.parse(k) for k in context.partition_keys]
        cells = [c for c in all_cells if not wave.is_carved_out(c)]
        unjudged = {c.key: "carved out: never run, never judged" for c in all_cells if wave.is_carved_out(c)}
        with store_connection(store) as con:
            rows = _cached(con, wave, cells, context.run_id) if wave.source == "import" else None
            work = _work(con, wave, cells, unjudged) if rows is None else []
        if rows is None:
            rows = _judged(work, wave, context.run_id)  # no store connection is held across judge calls
        with store_connection(store) as con, transaction(con):
            write_judgements(con, wave.name, [(c.operator, c.probe.key) for c in cells], rows)
        by_cell = {}
        for r in rows:
            by_cell.setdefault(f"{r['operator']}|{r['probe']}", []).append(r)
        none_cached = (
            "the corpus carries no judge verdict for this cell (the reference judged the cells its union missed)"
        )
        add_partition_metadata(
            context,
            {
                c.key: judgement_metadata(wave, c.key, by_cell.get(c.key, []), unjudged.get(c.key, none_cached))
                for c in all_cells
            },
        )
        excluded = sum(r["status"] != "ok" for r in rows)
        context.log.info(
            f"judge_verdicts: {len(rows)} verdict(s) over {len(cells)} cell(s), {excluded} judge exclusion(s)"
        )
        return dg.MaterializeResult(metadata={"backends": ", ".join(sorted({r["backend"] for r in rows})) or "none"})

    @dg.asset(
        name="kappa_audit",
        key_prefix=wave.name,
        group_name=wave.name,
        deps=[judge_verdicts],
        code_version="kappa-v1",
        automation_condition=REBUILD_BOARD,  # re-audited whenever the judge verdicts it reads update
        kinds={"duckdb"},
        tags={COST_TAG: "cheap"},
        description="Cohen's kappa over the double-judged cells (prompt variants 0 and 1); re-runs by itself when judge verdicts update.",
    )
    def kappa_audit(context: dg.AssetExecutionContext, store: DuckDBResource) -> dg.MaterializeResult:
        from judges.stats import (
            cohen_kappa,
            kappa_confidence,
        )  # numpy: imported when kappa computes, not with the definitions

        with store_connection(store) as con:
            verdicts = read_judgements(con, wave.name)
            pairs = [
                (v["noticed"], verdicts[(op, probe, 1)]["noticed"])
                for (op, probe, variant), v in verdicts.items()
                if variant == 0 and v["status"] == "ok" and verdicts.get((op, probe, 1), {}).get("status") == "ok"
            ]
            k = cohen_kappa(pairs)
            bound = registry.field("standard/kappa.v0.1.json", "bound")
            audit = {
                "kappa": k.kappa,
                "lo": k.lo,
                "hi": k.hi,
                "n": k.n,
                "bound": bound,
                "confidence": kappa_confidence(k, bound) if k.n else "not measured",
            }
            write_report(con, wave.name, "soft", "kappa.json", json.dumps(audit), context.run_id)
        return dg.MaterializeResult(
            metadata={
                "kappa": float(k.kappa) if k.n else float("nan"),
                "double-judged pairs": k.n,
                "confidence": audit["confidence"],
            }
        )

    @dg.asset_check(
        asset=kappa_audit,
        blocking=True,
        automation_condition=dg.AutomationCondition.eager(),
        description="Kappa at least the registered bound; otherwise the soft tier is low-confidence. Re-evaluated whenever the audit re-runs.",
    )
    def kappa_meets_bound(store: DuckDBResource) -> dg.AssetCheckResult:
        with store_connection(store) as con:
            audit = json.loads(read_report(con, wave.name, "soft", "kappa.json"))
        return dg.AssetCheckResult(
            passed=audit["confidence"] == "full",
            metadata={"kappa": str(audit["kappa"]), "n": audit["n"], "soft tier": audit["confidence"]},
        )

    return [judge_verdicts, kappa_audit], [kappa_meets_bound]
