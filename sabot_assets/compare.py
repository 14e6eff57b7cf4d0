"""`sabot compare`: did a change to a pipeline make it catch fewer faults?

Two scored waves (two registered versions of a team's project, or the same version on two models,
each in its own store, or two registered waves) are compared cell by cell on the cells both scored
validly under their headline readings: per operator and overall, the paired counts and exact
McNemar (judges/stats/contrasts.py, the statistics the standard's wave contrasts use), with Holm
across the operators, at the alpha registered in data/standard/compare.v1.json. Beside the numbers,
what changed in between: the registered files, the team's code, the endpoints and models the runs
met. Reads stored verdicts only; runs nothing and calls no model.
"""

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from judges.stats.contrasts import CELL_KEY, Contrast, holm_contrasts, mcnemar_exact
from sabot.registry import Registry, RegistryError
from sabot.store.db import connect
from sabot.store.verdicts import read_verdicts

COMPARE_DOC = "standard/compare.v1.json"
METRIC = "detected_hard"  # the headline detection: the pipeline's own checks acted on the planted fault


class CompareError(RegistryError):
    """A side of a comparison that cannot be read (no store, no scored verdicts): one line."""


@dataclass
class Side:
    """One wave to compare: its registry, its name and the store holding its verdicts."""

    target: str
    registry: Registry
    wave: str
    store: Path
    project: object = None  # sabot.projects.Project for a project folder

    @classmethod
    def of(cls, target: str, store: Path) -> "Side":
        from sabot.project_registry import ProjectRegistry
        from sabot.projects import PROJECT_DIR

        if (Path(target) / PROJECT_DIR / "project.json").is_file():
            registry = ProjectRegistry.from_dir(target)
            return cls(target, registry, registry.project.name, Path(store), registry.project)
        registry = Registry()
        registry.wave(target)  # an unknown wave: one line naming the registered ones
        return cls(target, registry, target, Path(store))

    @property
    def label(self) -> str:
        return f"{self.target} ({self.store})"

    def verdicts(self) -> list[dict]:
        if not self.store.exists():
            raise CompareError(f"{self.store}: no store here; run `sabot wave run {self.target}` with this store first")
        ruleset = self.registry.wave(self.wave).headline_ruleset
        with connect(self.store, read_only=True) as con:
            rows = read_verdicts(con, self.wave, ruleset)
        if not rows:
            raise CompareError(
                f"{self.store}: no scored cells of {self.wave} under {ruleset}; run `sabot wave run {self.target}` first"
            )
        return rows

    def endpoints(self) -> list[tuple[str, str, str]]:
        """(endpoint, pipeline model, O4 target) of this wave's runs, as stored with each attempt."""
        with connect(self.store, read_only=True) as con:
            return con.execute(
                "SELECT DISTINCT endpoint, pipeline_model, downgrade_model FROM attempts WHERE wave = ? ORDER BY 1, 2, 3",
                [self.wave],
            ).fetchall()

    def runs_met(self) -> list[str]:
        return [f"{endpoint} (pipeline model {model}, O4 target {o4})" for endpoint, model, o4 in self.endpoints()]

    def registered_files(self) -> dict[str, str]:
        """The registration the store pinned for a project (its files' sha256), else {}."""
        if self.project is None:
            return {}
        with connect(self.store, read_only=True) as con:
            row = con.execute("SELECT files FROM project_registrations WHERE project = ?", [self.wave]).fetchone()
        return json.loads(row[0]) if row else dict(self.project.shas)


@dataclass
class Comparison:
    before: Side
    after: Side
    alpha: float
    overall: Contrast
    operators: dict[str, Contrast]  # Holm-adjusted across the operators
    cells: list[dict]  # one row per paired cell: operator, seed, before, after
    unpaired: dict[str, int]  # "before only" / "after only": cells valid on one side alone
    changes: list[str] = field(default_factory=list)
    label: str = "simulation"  # what the numbers are: every run against a test double or scripted model is simulation

    @property
    def worse(self) -> list[Contrast]:
        """The contrasts whose detection fell, separated at the registered alpha (Holm within operators)."""
        return [c for c in (self.overall, *self.operators.values()) if c.separated_fall]

    def lines(self) -> list[str]:
        out = [
            f"compare ({self.label}): before {self.before.label}",
            f"         after  {self.after.label}",
            f"paired on the cells both scored validly: {self.overall.n}; valid on one side only: "
            f"before {self.unpaired['before only']}, after {self.unpaired['after only']}",
            f"detection (the pipeline's own checks acted on the fault), exact McNemar; Holm across operators; alpha {self.alpha:g} "
            f"({COMPARE_DOC}); b = caught before only, c = caught after only",
        ]
        out += [f"  {c.format()}" for c in self.operators.values()]
        out.append(f"  {self.overall.format()}")
        out.append("what changed in between:")
        out += [f"  {c}" for c in self.changes] or ["  nothing the registration, the code or the stored runs record"]
        verdict = (
            ("WORSE: detection fell, separated: " + ", ".join(c.label for c in self.worse))
            if self.worse
            else "no separated drop in detection"
        )
        out.append(f"compare: {verdict}")
        return out

    def document(self) -> dict:
        def contrast(c: Contrast) -> dict:
            return {
                "label": c.label,
                "n": c.n,
                "both": c.both,
                "before_only": c.b,
                "after_only": c.c,
                "before_rate": c.first_rate,
                "after_rate": c.second_rate,
                "difference": c.diff,
                "ci": [c.lo, c.hi],
                "p": c.p,
                "p_holm": c.p_holm,
                "status": c.status,
                "direction": c.direction,
            }

        return {
            "label": self.label,
            "before": self.before.label,
            "after": self.after.label,
            "alpha": self.alpha,
            "alpha_source": COMPARE_DOC,
            "metric": METRIC,
            "overall": contrast(self.overall),
            "operators": {op: contrast(c) for op, c in self.operators.items()},
            "cells": self.cells,
            "unpaired": self.unpaired,
            "changes": self.changes,
            "worse": [c.label for c in self.worse],
        }


def _key(row: dict, projects: bool) -> tuple:
    """A project has one framework, config and task: its cells pair on (operator, seed), so two
    versions registered under different names (or task ids) still pair; a wave pairs on the cell."""
    return (row["operator"], row["seed"]) if projects else tuple(row[k] for k in CELL_KEY)


def compare(before: Side, after: Side) -> Comparison:
    alpha = float(before.registry.doc(COMPARE_DOC)["alpha"])
    projects = before.project is not None and after.project is not None
    valid = [{_key(r, projects): r for r in side.verdicts() if r["status"] == "valid"} for side in (before, after)]
    keys = sorted(valid[0].keys() & valid[1].keys(), key=lambda k: tuple(map(str, k)))
    cells = [
        {
            "operator": valid[0][k]["operator"],
            "seed": valid[0][k]["seed"],
            "before": bool(valid[0][k][METRIC]),
            "after": bool(valid[1][k][METRIC]),
        }
        for k in keys
    ]
    operators = sorted({c["operator"] for c in cells})
    family = {
        op: mcnemar_exact([(c["before"], c["after"]) for c in cells if c["operator"] == op], alpha, op)
        for op in operators
    }
    overall = mcnemar_exact([(c["before"], c["after"]) for c in cells], alpha, "overall")
    unpaired = {
        "before only": len(valid[0].keys() - valid[1].keys()),
        "after only": len(valid[1].keys() - valid[0].keys()),
    }
    return Comparison(
        before,
        after,
        alpha,
        overall,
        holm_contrasts(family),
        cells,
        unpaired,
        changes(before, after),
        _label(before, after),
    )


def _label(*sides: Side) -> str:
    """The label: "simulation" when every run met a test double or the scripted model, "provider" when none did,
    else a mix (a simulated number is never shown as a finding)."""
    simulated = {endpoint.startswith("simulation") for side in sides for endpoint, _, _ in side.endpoints()}
    return (
        "simulation"
        if simulated == {True}
        else "provider"
        if simulated == {False}
        else "mix of simulation and provider"
    )


def changes(before: Side, after: Side) -> list[str]:
    """What differs between the two sides: registered files (with a diff of each), the team's code,
    the endpoints and models the stored runs met."""
    out = []
    if before.wave != after.wave:
        out.append(f"wave: {before.wave} -> {after.wave}")
    old, new = before.registered_files(), after.registered_files()
    for rel in sorted(old.keys() | new.keys()):
        if old.get(rel) != new.get(rel):
            out.append(
                f"registered {rel}: sha256 {(old.get(rel) or 'absent')[:12]} -> {(new.get(rel) or 'absent')[:12]}"
            )
            out += _file_diff(before, after, rel)
    if before.project is not None and after.project is not None:
        from sabot.projects import code_change

        ours, theirs = before.project.code_hashes(), after.project.code_hashes()
        if ours != theirs:
            out.append(f"code: {code_change(ours, theirs)}")
    met = before.runs_met(), after.runs_met()
    if met[0] != met[1]:
        out.append(f"runs met: {'; '.join(met[0]) or 'none'} -> {'; '.join(met[1]) or 'none'}")
    return out


def _file_diff(before: Side, after: Side, rel: str) -> list[str]:
    """A unified diff of a registered file as it is in the two folders (when both are on disk)."""
    if before.project is None or after.project is None:
        return []
    paths = [side.project.root / rel for side in (before, after)]
    if not all(p.is_file() for p in paths):
        return []
    text = [json.dumps(json.loads(p.read_text()), indent=1, sort_keys=True).splitlines() for p in paths]
    return [
        f"    {line}"
        for line in difflib.unified_diff(*text, fromfile=f"before/{rel}", tofile=f"after/{rel}", lineterm="", n=1)
    ]
