"""Model spend in the store: the priced calls of every stored run record, per run, wave and project."""

import hashlib
import json

from sabot.budget import Rate
from sabot.provenance import endpoint_kind
from sabot.store.db import replace_values
from sabot.trace import to_runresult

CALL_COLUMNS = [
    "wave",
    "operator",
    "probe",
    "run_id",
    "record_sha256",
    "attempt",
    "n",
    "model",
    "status",
    "upstream_attempts",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "usage_reported",
    "cost_usd",
    "price_table",
    "endpoint",
]
CALL_KEY = ["wave", "operator", "probe", "record_sha256"]
SUMS = (
    "COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens, COALESCE(SUM(completion_tokens), 0) AS completion_tokens, "
    "COALESCE(SUM(cached_tokens), 0) AS cached_tokens, COALESCE(SUM(reasoning_tokens), 0) AS reasoning_tokens, "
    "COALESCE(SUM(cost_usd), 0) AS cost_usd, COUNT(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_calls"
)


def record_sha256(record) -> str:
    """The content hash a run record's calls are keyed by (a replay equal to its source adds nothing)."""
    return hashlib.sha256(json.dumps(to_runresult(record), sort_keys=True).encode()).hexdigest()


def record_key(wave: str, operator: str | None, probe: str, record) -> str:
    """One run record's key in the spend ledger: as the store keys its calls."""
    return f"{wave}|{operator or ''}|{probe}|{record_sha256(record)}"


def kind_of(endpoint: str | None) -> str:
    return "simulated" if (endpoint or "").startswith("simulation") else "provider"


def stored_costs(con) -> dict:
    """record key -> (kind, metered cost) of every priced record in the store: what the ledger syncs."""
    if not _has_calls_table(con):
        return {}
    rows = con.execute(
        "SELECT wave, operator, probe, record_sha256, ANY_VALUE(endpoint), SUM(cost_usd) FROM model_calls "
        "WHERE cost_usd IS NOT NULL GROUP BY wave, operator, probe, record_sha256"
    ).fetchall()
    return {f"{w}|{op}|{p}|{sha}": (kind_of(endpoint), float(cost)) for w, op, p, sha, endpoint, cost in rows}


def write_calls(con, wave: str, operator: str | None, probe: str, record, _source_sha256: str | None = None) -> int:
    """Store a run record's priced calls (from its `usage`), once per record content (call in a transaction).

    Keyed by the hash of the record's content, not of the file it came from: a replayed run, whose
    record equals the original, adds no spend; a new attempt, with its own exchanges, adds its own."""
    usage = (record.extra or {}).get("usage") if record else None
    if not usage:
        return 0
    sha = record_sha256(record)
    op = operator or ""
    fixed = {
        "wave": wave,
        "operator": op,
        "probe": probe,
        "run_id": record.run_id,
        "record_sha256": sha,
        "price_table": usage["price_table"],
        "endpoint": record.extra.get("endpoint"),
    }
    rows = [tuple(fixed[k] if k in fixed else call.get(k) for k in CALL_COLUMNS) for call in usage["per_call"]]
    replace_values(con, "model_calls", CALL_KEY, [(wave, op, probe, sha)], CALL_COLUMNS, rows)
    return len(rows)


def _summary(row, names) -> dict:
    return dict(zip(names, row))


def _has_calls_table(con) -> bool:
    # A store last written before spend was recorded, opened read-only, has no such table yet.
    return bool(con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'model_calls'").fetchone())


def spend_of_wave(con, wave: str) -> dict | None:
    """A wave's calls, tokens and cost, in total and per framework/config row."""
    if not _has_calls_table(con):
        return None
    cur = con.execute(f"SELECT {SUMS} FROM model_calls WHERE wave = ?", [wave])
    names = [d[0] for d in cur.description]
    total = _summary(cur.fetchone(), names)
    cur = con.execute(
        f"SELECT split_part(probe, '.', 1) || '/' || split_part(probe, '.', 2) AS grp, {SUMS} FROM model_calls "
        "WHERE wave = ? GROUP BY grp ORDER BY grp",
        [wave],
    )
    names = [d[0] for d in cur.description]
    rows = [_summary(r, names) for r in cur.fetchall()]
    endpoints = sorted(
        {
            e
            for (e,) in con.execute(
                "SELECT DISTINCT endpoint FROM model_calls WHERE wave = ? AND endpoint IS NOT NULL", [wave]
            ).fetchall()
        }
    )
    return {
        "wave": wave,
        **total,
        "by_row": rows,
        "endpoints": endpoints,
        "by_kind": _by_kind(con, "WHERE wave = ?", [wave]),
    }


def _by_kind(con, where: str, args: list) -> dict:
    """Calls and cost per kind of endpoint (`sabot.provenance`): provider usage is money spent,
    simulated usage is not, and neither is ever added to the other."""
    out: dict[str, dict] = {}
    for endpoint, calls, cost in con.execute(
        f"SELECT endpoint, COUNT(*), COALESCE(SUM(cost_usd), 0) FROM model_calls {where} GROUP BY endpoint", args
    ).fetchall():
        entry = out.setdefault(endpoint_kind(endpoint) if endpoint else "unknown", {"calls": 0, "cost_usd": 0.0})
        entry["calls"] += calls
        entry["cost_usd"] = round(entry["cost_usd"] + float(cost), 6)
    return out


def spend_of_project(con) -> dict | None:
    """Every wave's spend in this store: what a project's budget is measured against."""
    if not _has_calls_table(con):
        return None
    cur = con.execute(f"SELECT {SUMS} FROM model_calls")
    names = [d[0] for d in cur.description]
    total = _summary(cur.fetchone(), names)
    waves = [w for (w,) in con.execute("SELECT DISTINCT wave FROM model_calls ORDER BY wave").fetchall()]
    return {**total, "waves": waves, "by_kind": _by_kind(con, "", [])}


def spend_of_run(con, wave: str, operator: str | None, probe: str) -> dict:
    cur = con.execute(
        f"SELECT {SUMS} FROM model_calls WHERE wave = ? AND operator = ? AND probe = ?", [wave, operator or "", probe]
    )
    return _summary(cur.fetchone(), [d[0] for d in cur.description])


def _kind(simulated: bool) -> str:
    # Scripted (or a project's test double) usage costs no money; it never counts against a provider budget.
    return "endpoint LIKE 'simulation%'" if simulated else "(endpoint IS NULL OR endpoint NOT LIKE 'simulation%')"


def spend_at(con, simulated: bool) -> float:
    """The project's spend so far at one kind of endpoint: what the §8 cap is measured against."""
    if not _has_calls_table(con):
        return 0.0
    return float(
        con.execute(f"SELECT COALESCE(SUM(cost_usd), 0) FROM model_calls WHERE {_kind(simulated)}").fetchone()[0]
    )


def rates_of(con, simulated: bool) -> dict:
    """framework -> per-run calls, tokens and cost over every recorded run at that kind of endpoint
    (a run is one stored record: its calls share a record hash)."""
    if not _has_calls_table(con):
        return {}
    rows = con.execute(
        "SELECT split_part(probe, '.', 1) AS framework, COUNT(DISTINCT (wave, operator, probe, record_sha256)) AS runs, "
        "COUNT(*) AS calls, SUM(prompt_tokens + completion_tokens) AS tokens, COALESCE(SUM(cost_usd), 0) AS cost "
        f"FROM model_calls WHERE {_kind(simulated)} GROUP BY framework"
    ).fetchall()
    return {fw: Rate(runs, calls / runs, tokens / runs, cost / runs) for fw, runs, calls, tokens, cost in rows}
