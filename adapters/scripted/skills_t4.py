"""T4 skill: plan a mast calibration run on a small road network under a fuel range.

Default reading: each road's distance from its first mention in the brief; a distance the road
status sheet (context) states overrides. Careful: distances from the brief's road table only, a
sheet marked superseded ignored. The planner searches every tour and commits the shortest one it
believes feasible, refuelling whenever it visits the depot. Characteristic weak-tier mistake (O4):
the fuel range is forgotten and no refuel is planned.
"""

import difflib
import json
import re

from adapters.scripted.skills_common import Conflict, dedupe, restated, stale_conflict, superseded_mark
from sabot.tasks import plan_violations

TABLE_ROAD = re.compile(r"^- (.+?) to (.+?)(?: \([^)]*\))?: (\d+ km)\s*$")
KM = re.compile(r"\b\d+ km\b")


def world_of(source: str) -> dict:
    grab = lambda pattern: m.group(1).strip() if (m := re.search(pattern, source, re.MULTILINE)) else ""
    masts = [m.strip() for m in grab(r"Masts to calibrate: ([^\n]+?)\.?\s*$").split(",") if m.strip()]
    order = re.search(r"Calibrate (.+?) before (.+?) \(", source)
    return {
        "base": grab(r"Base: ([^.\n]+)\."),
        "depot": grab(r"Fuel depot: ([^.\n]+)\."),
        "masts": masts,
        "fuel_range_km": int(grab(r"at most (\d+) km between refuels") or 0),
        "before": [list(order.groups())] if order else [],
        "roads": [],
    }


def statements(text: str, places: set[str], *, table_only: bool = False) -> list[tuple[frozenset, str]]:
    """(road, distance as written) for every stated distance, in document order."""
    out = []
    for line in text.splitlines():
        if m := TABLE_ROAD.match(line):
            out.append((frozenset((m.group(1), m.group(2))), m.group(3)))
        elif not table_only and len(kms := KM.findall(line)) == 1:
            named = [p for p in places if p in line]
            if len(named) == 2:
                out.append((frozenset(named), kms[0]))
    return out


def read(source: str, context: str, *, careful: bool) -> dict:
    world = world_of(source)
    places = {world["base"], world["depot"], *world["masts"]}
    stated = statements(source, places, table_only=careful)
    if not (careful and superseded_mark(context)):
        stated = statements(context, places) + stated  # the status sheet is issued after the brief
    roads = {}
    for road, km in stated:
        roads.setdefault(road, int(km.split()[0]))
    world["roads"] = [[*sorted(road), km] for road, km in roads.items()]
    return world


def plan(world: dict, *, fuel_aware: bool = True) -> list[str]:
    """The shortest tour the planner believes feasible, as tokens (depth-first over every tour)."""
    adj = {}
    for a, b, km in world["roads"]:
        adj.setdefault(a, {})[b] = km
        adj.setdefault(b, {})[a] = km
    base, depot, masts, full = world["base"], world["depot"], world["masts"], world["fuel_range_km"]
    tours = []

    def walk(loc, fuel, stops, done, dist):
        for nxt, km in sorted(adj.get(loc, {}).items()):
            left = fuel - km
            if (fuel_aware and left < 0) or len(stops) > 2 * len(masts) + 2:
                continue
            if nxt == base:
                if len(done) == len(masts):
                    tours.append((dist + km, len(stops), stops))
            elif nxt in masts and nxt not in done and all(a in done for a, b in world["before"] if b == nxt):
                walk(nxt, left, stops + [nxt], done | {nxt}, dist + km)
            elif nxt == depot and stops.count(depot) < 2:
                walk(nxt, full if fuel_aware else left, stops + [nxt], done, dist + km)

    walk(base, full, [], frozenset(), 0)
    if not tours:
        return ["depart_base", "return_base"]
    tokens, calibrated = ["depart_base"], set()
    for stop in min(tours)[2]:
        tokens.append(f"visit:{stop}")
        if stop in masts and stop not in calibrated:
            tokens.append(f"calibrate:{stop}")
            calibrated.add(stop)
        elif stop == depot and fuel_aware:
            tokens.append("refuel")
    return tokens + ["return_base"]


def solve(source: str, context: str, *, careful: bool, mistake: bool) -> str:
    return json.dumps(plan(read(source, context, careful=careful), fuel_aware=not mistake))


def review(source: str, context: str, draft: str) -> list[Conflict]:
    world = read(source, context, careful=True)
    places = {world["base"], world["depot"], *world["masts"]}
    found = []
    for road in {r for r, _ in statements(source, places)}:
        found += restated(
            [km for r, km in statements(source, places) if r == road], f"the {' to '.join(sorted(road))} distance"
        )
    if superseded_mark(context):
        found += stale_conflict(context)
        table = dict(statements(source, places, table_only=True))
        found += [
            Conflict(
                (km, table[r]),
                f"the superseded sheet gives {' to '.join(sorted(r))} as {km}, the brief's table as {table[r]}",
            )
            for r, km in statements(context, places)
            if r in table and km != table[r]
        ]
    try:
        tokens = json.loads(draft)
    except json.JSONDecodeError:
        return dedupe(found)
    if not isinstance(tokens, list):
        return dedupe(found)
    named = [t.partition(":")[2] for t in tokens if isinstance(t, str) and ":" in t]
    unknown = [n for n in named if n not in places]
    for name in dict.fromkeys(unknown):
        close = difflib.get_close_matches(name, sorted(places), n=1, cutoff=0.0)
        found.append(Conflict((name, *close), f"the plan names {name}, which the brief does not list"))
    if not unknown:
        lines = {m.group(1): m.group(0) for m in re.finditer(r"^(C\d)\. .*$", source, re.MULTILINE)}
        for constraint, what in plan_violations([t for t in tokens if isinstance(t, str)], world):
            found.append(Conflict((lines.get(constraint, constraint),), f"{constraint} is broken: {what}"))
    return dedupe(found)
