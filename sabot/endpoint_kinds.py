"""What kind of endpoint a run was made against, read from the label its record carries.

Four kinds: "simulation" (the scripted model or a project's test double), "local model" (a local
model server registered with SABOT_MODEL_LOCAL: real replies, no money spent), "provider", and
"replay of ..." (answered from stored exchanges). Boards and spend lines name the kind; only
simulation is ever labelled simulation, and a local model's wave is derived, never scored or banded.
"""

from __future__ import annotations

import os

from sabot.pricing import Price, PriceTable

SIMULATION, LOCAL_MODEL, PROVIDER, REPLAY = "simulation", "local model", "provider", "replay"
LOCAL_PRICE_ENV = "SABOT_LOCAL_MODEL_PRICE"  # "INPUT,OUTPUT" US$ per 1M tokens: what a team prices its own server at
LOCAL_PRICE_SOURCE = "local model server: $0 local (no money spent; SABOT_LOCAL_MODEL_PRICE prices it)"


def endpoint_kind(label: str | None) -> str | None:
    if not label:
        return None
    for kind in (SIMULATION, LOCAL_MODEL, PROVIDER, REPLAY):
        if label.startswith(kind + " ") or label == kind:
            return kind
    return PROVIDER


def is_local_model(label: str | None) -> bool:
    return endpoint_kind(label) == LOCAL_MODEL


def local_price_table(environ=os.environ) -> PriceTable:
    """Every model a local server serves, at $0 unless SABOT_LOCAL_MODEL_PRICE sets a price."""
    raw = (environ.get(LOCAL_PRICE_ENV) or "").strip()
    if not raw:
        return PriceTable(LOCAL_PRICE_SOURCE, {}, flat=Price(0.0, 0.0))
    try:
        given, out = (float(p) for p in raw.split(","))
    except ValueError:
        raise ValueError(f"{LOCAL_PRICE_ENV}={raw!r}: expected INPUT,OUTPUT in US$ per 1M tokens, e.g. 0.10,0.40") from None
    return PriceTable(f"local model server priced by {LOCAL_PRICE_ENV}={raw} (US$ per 1M tokens in, out)", {}, flat=Price(given, out))
