"""A team's own pipeline as a Sabot project: a folder holding its pipeline, task, seams, mapping and seeds.

    <project>/sabot/project.json    name, framework, pipeline "module:factory", responder, agents, task, seeds
    <project>/sabot/mapping.json    the detection-act mapping: which of the framework's own surfaces count
    <project>/sabot/operators.json  O1-O6: the seam each operator perturbs and how (and its ground truth)
    <project>/sabot/registry.lock.json   written by `sabot registry lock DIR`

The pattern's mapping-first rule (own-check fault injection, step 2; SPEC §5): the mapping is
registered before any data, and every registered file is hash-frozen. This module parses,
validates and registers the folder (`Project`); `sabot.project_registry.ProjectRegistry` then
presents the project as one more wave over the standard's data, so the same asset graph, store,
scorer, report and `explain` serve it; only the project's mapping, anchors and O4 target differ.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sabot.anchor_registration import injected_problems
from sabot.registry import RegistryError, sha256_bytes

PROJECT_DIR = "sabot"
FILES = ("mapping.json", "project.json", "operators.json")  # registration order: the mapping first
LOCK = "registry.lock.json"
FRAMEWORKS = ("langgraph", "crewai", "autogen", "agent_framework")  # each has a surface reader in adapters/byo
OPERATORS = ("O1", "O2", "O3", "O4", "O5", "O6")
ACTS = ("reject", "retry_with_reason", "escalate", "block")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")  # a Dagster key prefix, and a probe-key part (no dots)
# Per framework, the own-check surfaces a mapping may name (each is observed by the adapter), and
# the fields of each that name a part of the built pipeline (`sabot project check` finds them).
SURFACE_NAMES = {
    "langgraph": {
        "node_output": {"node": "node"},
        "routing": {"from": "node", "to": "node"},
        "rerun": {"node": "node"},
        "interrupt": {},
    },
    "crewai": {
        "guardrail": {"task": "task"},
        "guardrail_retry": {"task": "task"},
        "task_output": {"task": "task"},
        "exhaustion": {"task": "task"},
    },
    "autogen": {"agent_message": {"agent": "agent"}, "routing": {"from": "agent", "to": "agent"}, "stop_reason": {}},
    "agent_framework": {
        "agent_message": {"agent": "agent"},
        "orchestrator_event": {"event": "event"},
        "request_info": {},
        "output": {},
    },
}
SURFACES = {framework: tuple(surfaces) for framework, surfaces in SURFACE_NAMES.items()}
TOOL_SEAM_OPERATORS = {
    "O1": ("find", "result"),
    "O2": ("claim",),
    "O5": ("result", "find"),
    "O6": ("claim",),
    "O3": ("find",),
}
MODEL_SEAM_OPERATORS = {"O3": ("find",), "O4": ("model",), "O5": ("find",), "O1": ("find",)}
# How long a planted fault acts (an operator entry's "duration"): "once", on the first call it can
# act on, or "persists", on every one: every call of the tool; every request of the agent that
# carries the text it alters. A model swap serves every call of its agent, so it always persists.
DURATIONS = ("once", "persists")
DEFAULT_DURATION = {"tool": "persists", "model": "persists"}
# What a project's board says in place of the standard's cross-framework readings (SPEC §7 ranks
# frameworks; a project is one team's pipeline) and of the instrument check (a team's test double
# keeps no intent log to check the scorer against).
PROJECT_BOARD_NOTE = (
    "One team's pipeline, scored against its own registered mapping: these rates describe that "
    "pipeline and its checks, not a ranking across frameworks (SPEC §7)."
)
TEST_DOUBLE_NOTE = (
    "The project's test double stands in for the model so that the pipeline runs offline and the same "
    "way every time (CI, `sabot project check`); it keeps no intent log, so there is no instrument check. "
    "The rates below are the pipeline's own checks against its double: simulation, not a finding."
)


class ProjectError(RegistryError):
    """A project folder that is malformed, unregistered or edited after registration."""


def _read(path: Path) -> tuple[bytes, dict]:
    if not path.is_file():
        raise ProjectError(f"{path}: missing (run `sabot init` for a scaffold)")
    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProjectError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise ProjectError(f"{path}: expected a JSON object")
    return raw, doc


def _need(doc: dict, key: str, kind, where: str):
    if key not in doc:
        raise ProjectError(f"{where}: missing field {key!r}")
    if not isinstance(doc[key], kind) or isinstance(doc[key], bool) and kind is not bool:
        raise ProjectError(f"{where}: field {key!r} must be {getattr(kind, '__name__', kind)}")
    return doc[key]


def _target(value: str, where: str) -> str:
    if not isinstance(value, str) or not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$", value):
        raise ProjectError(f"{where}: expected 'module:attr', got {value!r}")
    return value


def validate_mapping(doc: dict, framework: str, where: str) -> list[dict]:
    surfaces = _need(doc, "surfaces", list, where)
    if not surfaces:
        raise ProjectError(f"{where}: surfaces: name at least one own-check surface")
    for i, s in enumerate(surfaces):
        at = f"{where}: surfaces[{i}]"
        if not isinstance(s, dict):
            raise ProjectError(f"{at}: expected an object")
        kind = _need(s, "surface", str, at)
        if kind not in SURFACES[framework]:
            raise ProjectError(
                f"{at}: surface {kind!r} is not a {framework} surface; one of {', '.join(SURFACES[framework])}"
            )
        if _need(s, "act", str, at) not in ACTS:
            raise ProjectError(f"{at}: act {s['act']!r} is not one of {', '.join(ACTS)}")
        for field in SURFACE_NAMES[framework][kind]:
            _need(s, field, str, at)
        for key in ("pattern",):
            if key in s:
                try:
                    re.compile(s[key])
                except re.error as exc:
                    raise ProjectError(f"{at}: pattern {s[key]!r} is not a regular expression ({exc})") from exc
    return surfaces


def validate_operators(doc: dict, where: str) -> dict:
    for op, spec in doc.items():
        at = f"{where}: {op}"
        if op not in OPERATORS:
            raise ProjectError(f"{at}: not an operator (O1-O6)")
        seam = _need(spec, "seam", str, at)
        allowed = TOOL_SEAM_OPERATORS if seam == "tool" else MODEL_SEAM_OPERATORS if seam == "model" else None
        if allowed is None:
            raise ProjectError(
                f"{at}: seam {seam!r} must be 'tool' (a tool object, by name) or 'model' (the model endpoint)"
            )
        if op not in allowed:
            raise ProjectError(f"{at}: {op} has no {seam} seam; use {'model' if seam == 'tool' else 'tool'}")
        if not any(k in spec for k in allowed[op]):
            raise ProjectError(f"{at}: a {seam}-seam {op} needs one of {', '.join(allowed[op])}")
        _need(spec, "tool" if seam == "tool" else "agent", str, at)
        if "find" in spec:
            _need(spec, "replace", str, at)
        _need(spec, "ground_truth", str, at)
        if "duration" in spec and spec["duration"] not in DURATIONS:
            raise ProjectError(f"{at}: duration {spec['duration']!r} is not one of {', '.join(DURATIONS)}")
        if seam == "model" and "model" in spec and spec.get("duration", "persists") != "persists":
            raise ProjectError(
                f"{at}: a model swap serves every call of {spec['agent']!r}: its duration can only be 'persists'"
            )
    return doc


def duration_of(spec: dict) -> str:
    """How long an operator entry's fault acts: as registered, else its seam's default."""
    return spec.get("duration") or DEFAULT_DURATION[spec["seam"]]


@dataclass(frozen=True)
class Project:
    """A parsed, validated project folder (registration is checked separately: `lock_problems`)."""

    root: Path
    doc: dict
    mapping: dict
    operators: dict
    shas: dict  # "sabot/<file>" -> sha256 of its bytes on disk

    @classmethod
    def load(cls, root) -> "Project":
        root = Path(root).resolve()
        base = root / PROJECT_DIR
        docs, shas = {}, {}
        for name in FILES:
            raw, docs[name] = _read(base / name)
            shas[f"{PROJECT_DIR}/{name}"] = sha256_bytes(raw)
        doc, where = docs["project.json"], str(base / "project.json")
        name = _need(doc, "name", str, where)
        if not NAME.match(name):
            raise ProjectError(f"{where}: name {name!r} must be lower-case letters, digits and underscores")
        framework = _need(doc, "framework", str, where)
        if framework not in FRAMEWORKS:
            raise ProjectError(f"{where}: framework {framework!r} is not one of {', '.join(FRAMEWORKS)}")
        _target(_need(doc, "pipeline", str, where), f"{where}: pipeline")
        if "responder" in doc:  # the offline test double; a project run only against a provider needs none
            _target(doc["responder"], f"{where}: responder")
        task = _need(doc, "task", dict, where)
        if not NAME.match(_need(task, "id", str, f"{where}: task")):
            raise ProjectError(f"{where}: task.id must be lower-case letters, digits and underscores")
        _need(task, "inputs", dict, f"{where}: task")
        check = _need(task, "pass", (str, dict), f"{where}: task")
        if isinstance(check, str):
            _target(check, f"{where}: task.pass")
        elif not isinstance(check.get("command"), list) or not check["command"]:
            raise ProjectError(f"{where}: task.pass must be 'module:function' or {{\"command\": [argv...]}}")
        seeds = _need(doc, "seeds", list, where)
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise ProjectError(f"{where}: seeds must be a non-empty list of integers")
        _need(doc, "agents", dict, where)
        validate_mapping(docs["mapping.json"], framework, str(base / "mapping.json"))
        validate_operators(docs["operators.json"], str(base / "operators.json"))
        project = cls(root, doc, docs["mapping.json"], docs["operators.json"], shas)
        refused = [
            line
            for op in project.operator_ids
            for line in injected_problems(
                str(base / "operators.json"), op, project.anchors(op), project.injected_text(op)
            )
        ]
        if refused:  # the anchor registration rules (SPEC v0.2.1 item 4), one line per refused anchor
            raise ProjectError("\n".join(refused))
        return project

    name = property(lambda self: self.doc["name"])
    framework = property(lambda self: self.doc["framework"])
    task_id = property(lambda self: self.doc["task"]["id"])
    seeds = property(lambda self: tuple(self.doc["seeds"]))
    config = property(lambda self: self.doc.get("config", "own"))

    @property
    def operator_ids(self) -> tuple[str, ...]:
        return tuple(op for op in OPERATORS if op in self.operators)

    def anchors(self, operator: str) -> tuple[str, ...]:
        """Text that quotes the planted fault (for the ruleset's anchor rules): given, or the replacement."""
        spec = self.operators.get(operator, {})
        return tuple(spec.get("anchors", [v for v in (spec.get("replace"),) if v]))

    def injected_text(self, operator: str) -> str | None:
        """The text the operator's fault puts in front of the pipeline; None for a model swap (O4)."""
        spec = self.operators.get(operator, {})
        if spec.get("seam") == "model" and "model" in spec:
            return None
        return spec.get("replace") or spec.get("claim") or spec.get("result")

    # -- the code a run executes: part of a stored run's identity ---------------------------

    def module_file(self, target: str) -> Path | None:
        """The file in the project folder of a "module:function" target (a module or a package)."""
        parts = target.partition(":")[0].split(".")
        for path in (self.root.joinpath(*parts).with_suffix(".py"), self.root.joinpath(*parts, "__init__.py")):
            if path.is_file():
                return path
        return None

    def code_hashes(self) -> dict[str, dict[str, str]]:
        """What of the team's code a run executes, by role, as {file: sha256}: the test double's and
        the pass criterion's modules (a command's files in the folder), and every other Python file
        of the folder as the pipeline's; with the default fault durations the operators resolve to.
        A stored run is reused only while all of it is unchanged (`sabot.runroot.Identity.code`)."""
        roles = {"test double": [self.module_file(self.doc["responder"])] if "responder" in self.doc else []}
        check = self.doc["task"]["pass"]
        roles["pass criterion"] = (
            [self.module_file(check)]
            if isinstance(check, str)
            else [self.root / a for a in check["command"] if (self.root / a).is_file()]
        )
        claimed = {p.resolve() for files in roles.values() for p in files if p}
        roles["pipeline"] = [
            p for p in sorted(self.root.rglob("*.py")) if p.resolve() not in claimed and not _outside_code(p, self.root)
        ]
        hashes = {
            role: {p.relative_to(self.root).as_posix(): sha256_bytes(p.read_bytes()) for p in files if p}
            for role, files in roles.items()
        }
        hashes["fault durations"] = dict(DEFAULT_DURATION)
        return hashes

    # -- registration: mapping first, then the data; never edited in place ------------------

    @property
    def lock_path(self) -> Path:
        return self.root / PROJECT_DIR / LOCK

    def locked(self) -> dict:
        if not self.lock_path.exists():
            return {}
        try:
            return json.loads(self.lock_path.read_text())["files"]
        except (ValueError, KeyError) as exc:
            raise ProjectError(f"{self.lock_path}: not a registration lock ({exc})") from exc

    def lock_problems(self) -> list[str]:
        locked, problems = self.locked(), []
        for rel, sha in self.shas.items():
            if rel not in locked:
                problems.append(f"{self.root.name}/{rel}: not registered (run `sabot registry lock {self.root}`)")
            elif locked[rel] != sha:
                problems.append(
                    f"{self.root.name}/{rel}: edited after registration (sha256 {sha[:12]}, registered {locked[rel][:12]}); "
                    "a changed registration is a new project: copy the folder under a new name, then `sabot registry lock NEW_DIR`"
                )
        return problems

    @property
    def registration(self) -> str:
        """One hash over the project's registered files: what a store pins (see `sabot.project_registry.pin_registration`)."""
        return sha256_bytes("".join(f"{rel} {sha}\n" for rel, sha in sorted(self.shas.items())).encode())

    def require_lockable(self) -> None:
        """Refuse any registered file whose bytes moved (above all the mapping): it is never re-registered."""
        locked = self.locked()
        edited = [rel for rel, sha in self.shas.items() if rel in locked and locked[rel] != sha]
        if edited:
            raise ProjectError(
                f"{self.root.name}: registered file(s) edited after registration: {', '.join(edited)}; "
                "a changed mapping or task is a new project (copy the folder under a new name)"
            )

    def write_lock(self) -> list[str]:
        """Register the project; refuses any registered file whose bytes moved (above all the mapping)."""
        self.require_lockable()
        locked = self.locked()
        added = [rel for rel in self.shas if rel not in locked]  # FILES order: mapping.json first
        doc = {"project": self.name, "order": list(self.shas), "files": dict(self.shas)}
        self.lock_path.write_text(json.dumps(doc, indent=1) + "\n")
        return added


def _outside_code(path: Path, root: Path) -> bool:
    """A file under the folder that is not the team's pipeline code: its registration, a virtualenv, caches."""
    parts = path.relative_to(root).parts[:-1]
    return any(
        p == PROJECT_DIR or p.startswith(".") or p in ("__pycache__", "site-packages", "venv", "node_modules")
        for p in parts
    )


def code_change(stored: dict, now: dict) -> str:
    """Why code hashes differ, for the CLI: "pass criterion my_checks.py changed; pipeline x.py added"."""
    if not stored:
        return "stored before the project's code was part of a run's identity"
    reasons = []
    for role in dict.fromkeys([*now, *stored]):
        old, new = stored.get(role) or {}, now.get(role) or {}
        if role == "fault durations":
            if old != new:
                reasons.append(
                    f"default fault durations changed ({', '.join(f'{k} {v}' for k, v in sorted(new.items()))})"
                )
            continue
        changed = sorted(f for f in old if f in new and old[f] != new[f])
        added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
        for files, verb in ((changed, "changed"), (added, "added"), (removed, "removed")):
            if files:
                reasons.append(f"{role} {', '.join(files)} {verb}")
    return "; ".join(reasons) or "the project's code changed"
