"""Judge verdicts (soft tier) in the store: cached per cell and prompt variant."""

from sabot.store.db import replace_values

COLUMNS = [
    "wave",
    "operator",
    "probe",
    "prompt_variant",
    "backend",
    "backend_version",
    "status",
    "noticed",
    "by_which_component",
    "evidence_quote",
    "raw",
    "attempts",
    "reason",
    "source",
    "dagster_run_id",
]


def write_judgements(con, wave: str, cell_keys: list[tuple[str, str]], rows: list[dict]) -> None:
    """Replace the verdicts of these cells (call inside a transaction)."""
    keys = [(wave, op, probe) for op, probe in cell_keys]
    replace_values(
        con,
        "judge_verdicts",
        ["wave", "operator", "probe"],
        keys,
        COLUMNS,
        [tuple(r.get(c) for c in COLUMNS) for r in rows],
    )


def read_judgements(con, wave: str, variant: int | None = None) -> dict[tuple[str, str, int], dict]:
    sql = f"SELECT {', '.join(COLUMNS)} FROM judge_verdicts WHERE wave = ?"
    params = [wave]
    if variant is not None:
        sql += " AND prompt_variant = ?"
        params.append(variant)
    rows = [dict(zip(COLUMNS, r)) for r in con.execute(sql, params).fetchall()]
    return {(r["operator"], r["probe"], r["prompt_variant"]): r for r in rows}
