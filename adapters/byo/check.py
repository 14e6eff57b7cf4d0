"""`sabot project check DIR`: a project's mistakes, named before anything is frozen or spent.

In order, each step only when the one before it held:
  1. the factory builds, as a run builds it (a failure names the team's file, line and error);
  2. every node, route target, task, agent and tool the mapping and the operators name is in the
     built pipeline (or, for a model-seam agent, in project.json `agents`); a name that is not
     comes with the near names (difflib's ratio, the standard library's fuzzy match);
  3. one baseline on the test double: whether the pass criterion passed it and what it said, and
     whether every agent a model-seam operator names was identified in its model requests.
`registry lock DIR` runs the same check and registers nothing unless it holds.
"""

import difflib
import functools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from adapters.byo.answer import built_answer
from adapters.byo.errors import TeamCodeError
from adapters.byo.models import requested_models
from adapters.byo.confined_work import FRAMEWORKS, build, importable, pipeline_process
from adapters.byo.runner import confined_result, execute, project_registry
from adapters.gateway import CallPolicy
from adapters.byo.tools import tool_objects
from adapters.outcome import INFRASTRUCTURE_ERRORS
from sabot.projects import SURFACE_NAMES, Project, ProjectError
from sabot.trace import EventKind, RunRecord

UNREACHABLE = "http://127.0.0.1:9/v1"  # the endpoint while only building: nothing listens (no call is expected)


@dataclass
class CheckReport:
    project: Project
    problems: list[str] = field(default_factory=list)
    built: str | None = None  # what the factory built, by the names a mapping can use
    baseline: RunRecord | None = None
    notes: list[str] = field(default_factory=list)  # worth knowing, not wrong

    @property
    def ok(self) -> bool:
        return not self.problems and self.baseline is not None and self.baseline.task_passed

    def lines(self) -> list[str]:
        out = [f"{self.project.name}: project check ({self.project.framework}, {self.project.root})"]
        if self.built:
            out.append(f"  built: {self.built}")
        out += [f"  PROBLEM {p}" for p in self.problems]
        if self.baseline is not None:
            out.append(baseline_line(self.baseline, self.project))
        out += [f"  note: {n}" for n in self.notes]
        out.append(f"{self.project.name}: project check " + ("passed" if self.ok else "FAILED"))
        return out


def baseline_line(record: RunRecord, project: Project) -> str:
    """One baseline's outcome as the team needs it: passed or FAILED, with the pass criterion's words."""
    criterion = record.extra.get("pass_criterion") or {}
    crashed = next((e.payload.get("error") for e in record.events if e.kind == EventKind.PIPELINE_ERROR), None)
    verdict = "passed" if record.task_passed else "FAILED"
    line = f"  baseline seed {record.seed}: {verdict}; pass criterion {_criterion_name(project)}: {criterion.get('output') or 'no output'}"
    return line + (f"\n    {crashed}" if crashed else "")


def _criterion_name(project: Project) -> str:
    check = project.doc["task"]["pass"]
    return check if isinstance(check, str) else " ".join(check["command"])


def near(name: str, known: set[str], kind: str, where: str, among: str = "in the built pipeline") -> list[str]:
    """[] when `name` is known; else one problem naming it, its near names and what there is."""
    if name in known:
        return []
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return [f"{where}: {kind} {name!r} is not {among}{hint} ({kind}s: {', '.join(sorted(known)) or 'none'})"]


def unknown_names(project: Project, pipeline, module) -> tuple[list[str], str]:
    """(problems, what was built) for every name the mapping and the operators use."""
    parts = FRAMEWORKS[project.framework].parts(pipeline)
    parts["tool"] = {t.name for t in tool_objects(pipeline, module)}
    problems = []
    for i, surface in enumerate(project.mapping["surfaces"]):
        for key, kind in SURFACE_NAMES[project.framework][surface["surface"]].items():
            problems += near(
                surface[key], parts.get(kind, set()), kind, f"mapping.json surfaces[{i}] ({surface['surface']}) {key}"
            )
    agents = set(project.doc["agents"])
    for op, spec in sorted(project.operators.items()):
        if spec["seam"] == "tool":
            problems += near(spec["tool"], parts["tool"], "tool", f"operators.json {op}")
        else:
            problems += near(spec["agent"], agents, "agent", f"operators.json {op}", among="one of project.json agents")
    shown = getattr(FRAMEWORKS[project.framework], "shown_parts", lambda _: {})(pipeline)
    built = f"{type(pipeline).__name__}; " + "; ".join(
        f"{kind}s: {shown.get(kind) or ', '.join(sorted(names)) or 'none'}" for kind, names in sorted(parts.items())
    )
    return problems, built


def _agents_unseen(project: Project, baseline: RunRecord) -> tuple[list[str], list[str]]:
    """(problems, notes) on the agents the baseline's model requests were identified as."""
    seen = set((baseline.extra.get("injection") or {}).get("agents_seen") or ())
    problems, notes = [], []
    named = {spec["agent"] for spec in project.operators.values() if spec["seam"] == "model"}
    for agent, marker in sorted(project.doc["agents"].items()):
        if agent in seen:
            continue
        text = (
            f"no model request of the baseline was identified as agent {agent!r} (no system prompt contains {marker!r})"
        )
        (problems if agent in named else notes).append(
            text + (": its model-seam fault cannot land" if agent in named else "")
        )
    return problems, notes


class Static(NamedTuple):
    problems: list[str]
    built: str | None  # what the factory built, by the names a mapping can use
    models: set[str]  # the model ids its clients ask for, and the O4 target (what a budget must price)


def _built_names(project: Project, build_dir: Path) -> tuple[list[str], str, set[str]]:
    """In the pipeline's confined process: build the factory, then name what the mapping misses and
    the models its clients ask for."""
    with importable(project), pipeline_process(project, build_dir, UNREACHABLE):
        pipeline, module = build(project)
        return [
            *unknown_names(project, pipeline, module),
            sorted(requested_models(pipeline)),
        ]  # as JSON: adapters.byo.answer.built_answer


def static_check(project: Project, tmp: Path) -> Static:
    """Steps 1 and 2, no model call. `wave run DIR` runs this part every time, whatever lock the
    folder holds: the team's code can change under an unchanged lock. The factory is the team's
    code: it runs confined, as in a run."""
    o4 = {project.operators["O4"]["model"]} if "O4" in project.operators else set()
    try:
        policy = CallPolicy.load(project_registry(project))
        problems, built, models = confined_result(
            project,
            functools.partial(_built_names, project, tmp / "build"),
            policy,
            (),
            tmp / "build",
            read=built_answer,
        )
        return Static(problems, built, models | o4)
    except TeamCodeError as exc:
        return Static([str(exc)], None, o4)


def check(root) -> CheckReport:
    """The check of the project folder at `root` (ProjectError if it does not even parse)."""
    project = Project.load(root)
    report = CheckReport(project)
    with tempfile.TemporaryDirectory(prefix=f"sabot-check-{project.name}-") as tmp:
        report.problems, report.built, _ = static_check(project, Path(tmp))
        if report.problems:
            return report
        if "responder" not in project.doc:
            report.problems.append(
                "project.json has no responder (test double): no baseline can be run offline to check the pass criterion"
            )
            return report
        try:
            report.baseline = execute(project, None, project.seeds[0], "check", Path(tmp) / "baseline", offline=True)
        except (TeamCodeError, ProjectError) as exc:
            report.problems.append(str(exc))
            return report
        except INFRASTRUCTURE_ERRORS as exc:
            report.problems.append(f"the baseline could not reach the test double: {type(exc).__name__}: {exc}")
            return report
        problems, report.notes = _agents_unseen(project, report.baseline)
        report.problems += problems
    return report
