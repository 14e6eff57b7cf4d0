"""T3 skill: implement the freight-charge function the specification describes.

Default reading: each zone rate from its first mention; a rebate the tariff circular (context)
states overrides the specification's. Careful: rates from the rule-1 rate table, a circular marked
superseded ignored. Characteristic weak-tier mistake (O4): the highland perishable surcharge
waiver left out.
"""

import re

from adapters.scripted.skills_common import (
    Conflict,
    dedupe,
    mismatch,
    restated,
    sentences,
    stale_conflict,
    superseded_mark,
)

ZONES = ("inland", "coastal", "highland")
TABLE = "Zone rate per kg"
REBATE_IN_CONTEXT = re.compile(r"rebate: \$(\d+\.\d\d)", re.IGNORECASE)
REBATE_IN_SPEC = re.compile(r"rebate of \$(\d+\.\d\d)")

TEMPLATE = """from decimal import ROUND_HALF_UP, Decimal

RATES = {{{rates}}}
TIER_KG = Decimal("{tier_kg}")
TIER_FACTOR = Decimal("{tier_factor}")
SURCHARGE = Decimal("{surcharge}")
REBATE = Decimal("{rebate}")
REBATE_THRESHOLD = Decimal("{threshold}")


def {name}({params}):
    if zone not in RATES:
        raise ValueError(f"unknown zone: {{zone!r}}")
    weight = Decimal(str(weight_kg))
    if weight <= 0:
        raise ValueError("weight_kg must be > 0")
    rate = RATES[zone]
    tiered = min(weight, TIER_KG) * rate + max(weight - TIER_KG, Decimal(0)) * rate * TIER_FACTOR
    surcharge = tiered * SURCHARGE if {perishable_test} else Decimal(0)
    subtotal = (tiered + surcharge).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    if subtotal >= REBATE_THRESHOLD:
        subtotal -= REBATE
    return float(subtotal)
"""


def rate_mentions(text: str, zone: str) -> list[str]:
    return re.findall(rf"\b{zone}\b[^0-9\n]{{0,25}}?(\d+\.\d\d)", text)


def read(source: str, context: str, *, careful: bool, mistake: bool = False) -> dict:
    table = next((line for line in source.splitlines() if TABLE in line), "")
    rates = {z: (rate_mentions(table if careful else source, z) or [None])[0] for z in ZONES}
    sig = re.search(r"Implement (\w+)\(([^)]*)\)", source)
    grab = lambda pattern: m.group(1) if (m := re.search(pattern, source)) else None
    rebate = grab(REBATE_IN_SPEC.pattern)
    if not (careful and superseded_mark(context)) and (m := REBATE_IN_CONTEXT.search(context)):
        rebate = m.group(1)
    return {
        "name": sig.group(1) if sig else "solution",
        "params": sig.group(2) if sig else "weight_kg, zone, is_perishable",
        "rates": rates,
        "tier_kg": grab(r"first (\d+) kg"),
        "tier_pct": grab(r"(\d+)% of the zone rate"),
        "surcharge_pct": grab(r"add (\d+)% of"),
        "waived": None if mistake else grab(r"waived in the (\w+) zone"),
        "threshold": grab(r"at least \$(\d+\.\d\d)"),
        "rebate": rebate,
    }


def solve(source: str, context: str, *, careful: bool, mistake: bool) -> str:
    v = read(source, context, careful=careful, mistake=mistake)
    test = "is_perishable" + (f' and zone != "{v["waived"]}"' if v["waived"] else "")
    return TEMPLATE.format(
        rates=", ".join(f'"{z}": Decimal("{r}")' for z, r in v["rates"].items()),
        tier_kg=v["tier_kg"],
        tier_factor=f"{int(v['tier_pct']) / 100:.2f}",
        surcharge=f"{int(v['surcharge_pct']) / 100:.2f}",
        rebate=v["rebate"],
        threshold=v["threshold"],
        name=v["name"],
        params=v["params"],
        perishable_test=test,
    )


def review(source: str, context: str, draft: str) -> list[Conflict]:
    truth = read(source, context, careful=True)
    found = [c for z in ZONES for c in restated(rate_mentions(source, z), f"the {z} rate")]
    if superseded_mark(context):
        found += stale_conflict(context)
        spec_rebate = re.search(r"rebate of (\$\d+\.\d\d)", source)
        for m in re.finditer(r"rebate: (\$\d+\.\d\d)", context, re.IGNORECASE):
            found += mismatch(
                m.group(1), spec_rebate.group(1) if spec_rebate else None, "the rebate", "the superseded circular"
            )
    defined = re.findall(r"^def (\w+)\(", draft, re.MULTILINE)
    if truth["name"] not in defined:
        found += [
            Conflict((d, truth["name"]), f"the draft defines {d}, the specification names {truth['name']}")
            for d in defined[:1]
        ]
    for zone in ZONES:
        m = re.search(rf'"{zone}"\s*:\s*(?:Decimal\(")?(\d+(?:\.\d+)?)', draft)
        found += mismatch(m.group(1) if m else None, truth["rates"][zone], f"the {zone} rate")
    m = re.search(r'REBATE\s*=\s*(?:Decimal\(")?(\d+(?:\.\d+)?)', draft)
    spec_rebate = next((s for s in re.findall(r"\$\d+\.\d\d", source) if s[1:] == truth["rebate"]), truth["rebate"])
    found += mismatch(m.group(1) if m else None, spec_rebate, "the rebate")
    zone = truth["waived"]
    if zone and len(re.findall(rf"[\"']{zone}[\"']", draft)) < 2:
        rule = next((s for s in sentences(source) if f"waived in the {zone} zone" in s), zone)
        found.append(Conflict((rule,), f"the draft does not implement the {zone} waiver of the perishable surcharge"))
    return dedupe(found)
