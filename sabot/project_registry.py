"""A registered project as the scorer meets it: the standard's data with the project laid over it as
one more wave (`ProjectRegistry`), and the project's registration pinned in the store.

The folder itself (its files, their validation and its lock) is `sabot.projects`; kept apart so
that what the asset graph, store, scorer, report and `explain` read of a project sits in one place.
"""

import json
import re
from pathlib import Path

from sabot.pricing import PRICES_DOC
from sabot.projects import LOCK, OPERATORS, PROJECT_DIR, Project, ProjectError
from sabot.registry import DATA_DIR, Registry, RegistryError, RegistryFile, pin_standard, sha256_bytes

HEADLINE = "v0.2.1"  # the standard as written since v0.2.1: a project scores new data


def standard_mapping(project: Project, base: dict) -> dict:
    """The project's mapping in the shape the hard-tier scorer reads (acts per framework)."""
    acts: dict[str, list[str]] = {}
    for s in project.mapping["surfaces"]:
        acts.setdefault(s["act"], []).append(s.get("describe") or json.dumps(s, sort_keys=True))
    return {
        "name": "detection_act_mappings",
        "version": f"{project.name}-registered",
        "source": f"{project.root.name}/{PROJECT_DIR}/mapping.json",
        "event_kind": base["event_kind"],
        "corrective_acts": base["corrective_acts"],
        "frameworks": {
            project.framework: {
                "pin": project.mapping.get("pin", ""),
                "counted_surfaces": project.mapping.get("describe", ""),
                "acts": acts,
                "stop_reason_block": False,
            }
        },
        "block_patterns": base["block_patterns"],
    }


class ProjectRegistry(Registry):
    """The standard's data plus one project, seen as a registered wave named after the project."""

    def __init__(self, project: Project, root: Path = DATA_DIR):
        super().__init__(root)
        self.project = project
        self._overlay()

    @classmethod
    def from_dir(cls, path) -> "ProjectRegistry":
        return cls(Project.load(path))

    def fresh(self) -> "ProjectRegistry":
        return ProjectRegistry(Project.load(self.project.root), self.root)

    def _put(self, rel: str, doc: dict, sha: str) -> None:
        self.files[rel] = RegistryFile(rel, sha, doc)

    def _overlay(self) -> None:
        p, mapping_sha = self.project, self.project.shas[f"{PROJECT_DIR}/mapping.json"]
        self._data_files = set(self.files)
        mapping_rel = f"mappings.{p.name}.json"
        self._put(
            f"standard/{mapping_rel}", standard_mapping(p, self.doc("standard/mappings.v0.1.2.json")), mapping_sha
        )
        ruleset = json.loads(json.dumps(self.doc(f"rulesets/{HEADLINE}.json")))
        ruleset["uses"]["mappings"] = mapping_rel
        ruleset["uses"]["strict"] = (
            "strict_anchors.v0.2.1.json"  # the board's strict floor, with no classification for the project's task
        )
        ruleset["rules"]["flags_surface"] = bool(
            p.mapping.get("flags_surface", False)
        )  # only the surfaces the mapping names
        ruleset["summary"] = (
            f"{ruleset['summary']} Applied to {p.name}'s registered mapping ({p.root.name}/{PROJECT_DIR}/mapping.json); "
            f"FLAGS surface {'on' if ruleset['rules']['flags_surface'] else 'off'}."
        )
        self._put(
            f"rulesets/{HEADLINE}.json",
            ruleset,
            sha256_bytes((self.files[f"rulesets/{HEADLINE}.json"].sha256 + mapping_sha).encode()),
        )
        models = dict(self.doc("standard/models.v0.1.1.json"))
        if "O4" in p.operators:
            models["o4_downgrade_model"] = p.operators["O4"]["model"]
        self._put("standard/models.v0.1.1.json", models, p.shas[f"{PROJECT_DIR}/operators.json"])
        model_ids = json.loads(json.dumps(self.doc("standard/model_ids.v1.json")))
        if "O4" in p.operators:  # the project's own downgrade target lands O4, as the pin or a dated snapshot of it
            target = p.operators["O4"]["model"]
            model_ids["roles"]["o4_downgrade_model"] = {
                "pin": target,
                "served_as": f"^{re.escape(target)}(-\\d{{4}}-\\d{{2}}-\\d{{2}})?$",
            }
        self._put("standard/model_ids.v1.json", model_ids, p.shas[f"{PROJECT_DIR}/operators.json"])
        strict = json.loads(json.dumps(self.doc("standard/strict_anchors.v0.2.1.json")))
        strict["kept"][p.task_id] = {
            op: [] for op in OPERATORS
        }  # no injection-only anchor classification for a project
        self._put(
            "standard/strict_anchors.v0.2.1.json", strict, self.files["standard/strict_anchors.v0.2.1.json"].sha256
        )
        anchors_rel = f"standard/{ruleset['uses']['anchors']}"  # a ruleset reads its anchors from its own files: add the project's
        anchors = json.loads(json.dumps(self.doc(anchors_rel)))
        anchors["anchors"][p.task_id] = {op: list(p.anchors(op)) for op in p.operator_ids}
        self._put(
            anchors_rel,
            anchors,
            sha256_bytes((self.files[anchors_rel].sha256 + p.shas[f"{PROJECT_DIR}/operators.json"]).encode()),
        )
        from sabot.project_prices import priced_doc

        self._put(PRICES_DOC, *priced_doc(p.root, self.doc(PRICES_DOC), self.files[PRICES_DOC].sha256, self))
        self._put(
            f"seeds/{p.name}.json",
            {"name": f"seeds_{p.name}", "seeds": list(p.seeds)},
            p.shas[f"{PROJECT_DIR}/project.json"],
        )
        self._put(
            f"waves/{p.name}.json",
            {
                "name": p.name,
                "source": "live",
                "corpus_dir": None,
                "protocol": 1,
                "seeds": f"seeds/{p.name}.json",
                "carveout": None,
                "frameworks": [p.framework],
                "configs": [p.config],
                "tasks": [p.task_id],
                "operators": list(p.operator_ids),
                "headline_ruleset": HEADLINE,
                "readings": [HEADLINE],
                "label": "simulation",
                "project": True,
            },
            p.shas[f"{PROJECT_DIR}/project.json"],
        )
        from sabot import tasks  # the judge reads each operator's ground-truth note, as for T1-T5

        tasks.register_oracle(
            tasks.Oracle(p.task_id, p.name, "", {}, (), {op: dict(spec) for op, spec in p.operators.items()})
        )

    def wave_names(self) -> list[str]:
        return [self.project.name]

    def anchors(self, task: str, operator: str) -> tuple[str, ...]:
        if task == self.project.task_id:
            return self.project.anchors(operator)
        return super().anchors(task, operator)

    def lock_problems(self) -> list[str]:
        data = Registry(self.root).lock_problems()
        return data + Project.load(self.project.root).lock_problems()

    def require_pinned(self, open_store) -> None:
        with open_store() as con:
            pin_standard(con, self.standard_hashes)  # the standard's files it lays over, as any wave's
            pin_registration(con, self.project, "first run")

    def require_still_registered(self, rels=None) -> None:
        """The scoring guard for a project wave: the standard's files it lays over, as on disk, and the
        project's own files, both as this registry loaded them and as they are on disk now."""
        data = [rel for rel in (self.files if rels is None else rels) if rel in self._data_files]
        Registry(self.root).require_still_registered(data)
        locked = self.project.locked()
        problems = [
            f"{self.project.root.name}/{rel}: loaded while edited (sha256 {sha[:12]}, registered {locked.get(rel, 'absent')[:12]}); reload the definitions"
            for rel, sha in self.project.shas.items()
            if locked.get(rel) != sha
        ]
        problems += Project.load(self.project.root).lock_problems()
        if problems:
            raise RegistryError("the registry no longer matches its registration:\n  " + "\n  ".join(problems))


# -- the registration pinned in the store ----------------------------------------------------------
# The lock file lives in the project folder, beside the mapping it freezes: whoever can edit one can
# edit both. The store keeps its own copy of the registration from the first time it met the project,
# so runs and verdicts already stored are never re-scored under a mapping registered anew.


def pin_registration(con, project: Project, by: str) -> None:
    """Pin the project's registration in the store the first time (`by`: 'registry lock' or 'first
    run'); afterwards refuse, naming the lock file, any registration that differs from the pin. A
    store that holds runs or verdicts of the project but no pin is refused too: they cannot be tied
    to a registration."""
    import datetime as dt

    name, where = project.name, f"{project.root.name}/{PROJECT_DIR}/{LOCK}"
    pinned = con.execute(
        "SELECT registration, pinned_at, pinned_by FROM project_registrations WHERE project = ?", [name]
    ).fetchall()
    if pinned:
        registration, at, pinned_by = pinned[0]
        if registration != project.registration:
            raise ProjectError(
                f"{where}: project {name} is registered as {project.registration[:12]}, but this store pinned it as "
                f"{registration[:12]} ({pinned_by}, {at:%Y-%m-%d %H:%M} UTC); its stored runs and verdicts belong to that "
                "registration. A changed mapping, task or operators is a new project (copy the folder under a new name)"
            )
        return
    stored = sum(
        con.execute(f"SELECT count(*) FROM {table} WHERE wave = ?", [name]).fetchone()[0]
        for table in ("runs", "cell_verdicts")
    )
    if stored:
        raise ProjectError(
            f"{where}: this store holds {stored} run(s) and verdict(s) of project {name} but no pinned "
            "registration, so they cannot be tied to the registered mapping; score them in a fresh store"
        )
    con.execute(
        "INSERT INTO project_registrations VALUES (?, ?, ?, ?, ?)",
        [
            name,
            project.registration,
            json.dumps(project.shas, sort_keys=True),
            dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
            by,
        ],
    )
