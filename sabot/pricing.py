"""What model calls cost: the registered price table (SPEC v0.2.1 §8 prices per 1M tokens) applied
to the usage each call reported.

Pure functions over plain data. Cached prompt tokens are priced as input (the spec names no
discount) and reasoning tokens, which providers count inside completion tokens, as output once. A
call whose model has no price, or that reported no usage, is counted as unpriced, never as free.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_DOC = "standard/prices.v0.2.1.json"
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float


@dataclass(frozen=True)
class PriceTable:
    source: str
    prices: dict[str, Price]
    flat: Price | None = None  # every model at this price (a local model server's table)

    @classmethod
    def from_registry(cls, registry, doc_name: str = PRICES_DOC) -> "PriceTable":
        doc = registry.doc(doc_name)
        return cls(
            doc_name, {m: Price(float(p["input"]), float(p["output"])) for m, p in doc["per_million_tokens"].items()}
        )

    def price_for(self, model: str | None) -> Price | None:
        """The price of a model id; a dated id (gpt-5.6-terra-2026-07-01) takes its base id's price."""
        if not model:
            return None
        if self.flat is not None:
            return self.flat
        if model in self.prices:
            return self.prices[model]
        base = max((m for m in self.prices if model.startswith(m + "-")), key=len, default=None)
        return self.prices[base] if base else None

    def cost(self, model: str | None, usage: dict | None) -> float | None:
        price = self.price_for(model)
        if price is None or usage is None:
            return None
        return (
            usage["prompt_tokens"] * price.input_per_million + usage["completion_tokens"] * price.output_per_million
        ) / 1e6


def call_rows(exchanges: list[dict], table: PriceTable, attempt: int) -> list[dict]:
    """One priced row per exchange that went upstream (replayed or refused calls carry their record)."""
    rows = []
    for x in exchanges:
        request = x.get("request") if isinstance(x.get("request"), dict) else {}
        model = x.get("model") or request.get("model")
        usage = x.get("usage")
        rows.append(
            {
                "attempt": attempt,
                "n": x.get("n"),
                "model": model,
                "status": x.get("status"),
                "upstream_attempts": len(x.get("attempts") or ()),
                **{f: (usage or {}).get(f, 0) for f in TOKEN_FIELDS},
                "usage_reported": usage is not None,
                "cost_usd": table.cost(model, usage),
            }
        )
    return rows


def totals(rows: list[dict], source: str) -> dict:
    """A run's (or any set of calls') tokens and cost; unpriced calls are counted, never priced at 0."""
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    return {
        "calls": len(rows),
        **{f: sum(r[f] for r in rows) for f in TOKEN_FIELDS},
        "cost_usd": round(sum(priced), 6),
        "unpriced_calls": len(rows) - len(priced),
        "price_table": source,
    }


USAGE = {
    "provider": "provider usage",
    "simulation": "simulated usage priced at spec prices, no money spent",
    "local model": "local model usage: $0 local unless SABOT_LOCAL_MODEL_PRICE prices it",
}


def _usage(kind: str) -> str:
    return USAGE.get(kind, f"{kind} usage")


def spend_text(spend: dict | None, project: dict | None, margin: float | None = None) -> str:
    """The board's spend line: calls, tokens and cost of the wave, and of the whole project store;
    with the registered spend `margin`, the margined figure the cap is measured against beside it.

    Against the scripted model no money is spent: the figure is what its reported usage would cost at
    the registered prices, and it is labelled so. Calls of several kinds of endpoint are split by
    kind (`sabot.provenance`): simulated usage is never printed as provider spend."""
    if not spend or not spend["calls"]:
        return "spend: no model calls recorded for this wave"
    kinds = spend.get("by_kind") or {}
    margined = (lambda cost: f" metered, ${cost * margin:.4f} margined (x{margin:g})") if margin else (lambda cost: "")
    unpriced = f"; {spend['unpriced_calls']} call(s) unpriced" if spend["unpriced_calls"] else ""
    tokens = (
        f"tokens: prompt {spend['prompt_tokens']}, completion {spend['completion_tokens']}, cached {spend['cached_tokens']}, "
        f"reasoning {spend['reasoning_tokens']}{unpriced}"
    )
    if len(kinds) > 1:
        parts = [
            f"{_usage(k)}: ${v['cost_usd']:.4f}{margined(v['cost_usd']) if k == 'provider' else ''} over {v['calls']} call(s)"
            for k, v in sorted(kinds.items())
        ]
        line = f"spend, split by what answered the calls: {'; '.join(parts)}; {tokens}"
    else:
        # No endpoint on record is not evidence of simulation: only calls all labelled so say no money was spent.
        what = _usage(next(iter(kinds))) if kinds and "unknown" not in kinds else "provider usage"
        line = f"spend ({what}): ${spend['cost_usd']:.4f}{margined(spend['cost_usd'])} over {spend['calls']} call(s); {tokens}"
    if project:
        split = project.get("by_kind") or {}
        if len(split) > 1:
            line += "\nproject spend (all waves in this store): " + "; ".join(
                f"{_usage(k)}: ${v['cost_usd']:.4f}{margined(v['cost_usd']) if k == 'provider' else ''} over {v['calls']} call(s)"
                for k, v in sorted(split.items())
            )
        else:
            line += f"\nproject spend (all waves in this store): ${project['cost_usd']:.4f}{margined(project['cost_usd'])} over {project['calls']} call(s)"
    return line


LOCAL_PRICE_ENV = "SABOT_LOCAL_MODEL_PRICE"  # "INPUT,OUTPUT" US$ per 1M tokens: what a team prices its own server at
LOCAL_PRICE_SOURCE = "local model server: $0 local (no money spent; SABOT_LOCAL_MODEL_PRICE prices it)"


def local_price_table(environ=None) -> PriceTable:
    """Every model a local model server serves, at $0 unless SABOT_LOCAL_MODEL_PRICE sets a price."""
    import os

    raw = ((os.environ if environ is None else environ).get(LOCAL_PRICE_ENV) or "").strip()
    if not raw:
        return PriceTable(LOCAL_PRICE_SOURCE, {}, flat=Price(0.0, 0.0))
    try:
        given, out = (float(p) for p in raw.split(","))
    except ValueError:
        raise ValueError(
            f"{LOCAL_PRICE_ENV}={raw!r}: expected INPUT,OUTPUT in US$ per 1M tokens, e.g. 0.10,0.40"
        ) from None
    return PriceTable(
        f"local model server priced by {LOCAL_PRICE_ENV}={raw} (US$ per 1M tokens in, out)", {}, flat=Price(given, out)
    )
