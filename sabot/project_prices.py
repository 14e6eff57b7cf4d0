"""A team's prices for its own models: `<project>/sabot/prices.json`, laid over the registered price
table for the project's waves, so its spend and its `--budget` count the models it actually uses.

    {"per_million_tokens": {"my-model": {"input": 0.50, "output": 1.50}},
     "tables": ["standard/prices.v0.2.1.json"]}

`per_million_tokens` prices model ids as the standard's table does (a dated id takes its base id's
price); `tables` names registered price tables under data/ to take prices from as well (a provider's
published table, registered once). The project's own entries win. The file is optional; without it
only the standard's models are priced, and a provider wave with a budget refuses a model that has
no price before any call (`unpriced`), since an unpriced call would count as $0 against it.
"""

import json
from pathlib import Path

from sabot.pricing import PRICES_DOC, PriceTable
from sabot.registry import RegistryError, sha256_bytes

PRICES_FILE = "prices.json"


def prices_path(root: Path) -> Path:
    return Path(root) / "sabot" / PRICES_FILE


def _price(entry, where: str) -> dict:
    if not isinstance(entry, dict) or not all(
        isinstance(entry.get(k), (int, float)) and not isinstance(entry.get(k), bool) and entry[k] >= 0
        for k in ("input", "output")
    ):
        raise RegistryError(f'{where}: expected {{"input": USD, "output": USD}} per 1M tokens, non-negative numbers')
    return {"input": float(entry["input"]), "output": float(entry["output"])}


def priced_doc(root: Path, base: dict, base_sha: str, registry) -> tuple[dict, str]:
    """(the price table a project's waves read, its hash): the registered table, the tables the
    project names, then the project's own prices. One clear line for a malformed file."""
    path = prices_path(root)
    if not path.is_file():
        return base, base_sha
    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RegistryError(f"{path}: not valid JSON ({exc})") from exc
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("per_million_tokens", {}), dict)
        or not isinstance(doc.get("tables", []), list)
    ):
        raise RegistryError(
            f'{path}: expected {{"per_million_tokens": {{MODEL: {{"input", "output"}}}}, "tables": [registered table, ...]}}'
        )
    merged = dict(base["per_million_tokens"])
    for table in doc.get("tables", []):
        if table not in registry.files:
            raise RegistryError(f"{path}: tables: {table!r} is not a registered file under data/")
        merged.update({m: _price(p, f"{table}: {m}") for m, p in registry.doc(table)["per_million_tokens"].items()})
    merged.update(
        {m: _price(p, f"{path}: per_million_tokens.{m}") for m, p in doc.get("per_million_tokens", {}).items()}
    )
    out = {
        **base,
        "per_million_tokens": merged,
        "source": f"{base.get('source', PRICES_DOC)}; with the project's {path.parent.parent.name}/sabot/{PRICES_FILE}",
    }
    return out, sha256_bytes((base_sha + sha256_bytes(raw)).encode())


def unpriced(registry, models) -> list[str]:
    """The model ids among `models` the registry's price table (the project's, laid over) cannot price."""
    table = PriceTable.from_registry(registry)
    return sorted(m for m in set(models) if m and table.price_for(m) is None)
