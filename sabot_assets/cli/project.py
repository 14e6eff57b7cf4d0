"""`sabot init`, `sabot project check` and the project forms of `wave run`, `registry lock` and `explain`
(a team's own pipeline)."""

import contextlib
from pathlib import Path

import click

from sabot_assets.cli.common import guarded
from sabot_assets.cli.targets import is_project, require_project
from sabot.trace import EventKind

SCAFFOLDS = Path(__file__).resolve().parents[2] / "adapters" / "byo" / "scaffold"  # one folder per framework
# sabot.projects.FRAMEWORKS, without importing it for --help; Agent Framework by its package's name too
SCAFFOLD_FRAMEWORKS = ("langgraph", "crewai", "autogen", "agent-framework", "agent_framework")


def adopt_project(ctx, target: str, gate: bool = False) -> str:
    """When TARGET is a project folder, the context serves its registry and the wave is the project's.
    With `gate` (a run), the project must pass the gate first (`gate_project`); the model ids its
    pipeline asks for are kept on the context (`ctx.project_models`) for the budget to price."""
    if not is_project(target):
        return target
    from sabot.project_registry import ProjectRegistry

    ctx.registry = ProjectRegistry.from_dir(target)
    if gate:
        ctx.project_models = gate_project(ctx.registry.project)
    return ctx.registry.project.name


def gate_project(project) -> set[str]:
    """`wave run DIR` runs only a project that is registered as it is on disk and whose static check
    (the factory builds; every name the mapping and operators use is in the built pipeline) holds
    now: the check runs every time, because the team's code can change under an unchanged lock."""
    import tempfile

    from adapters.byo.check import static_check
    from sabot.projects import ProjectError

    problems = project.lock_problems()
    if not project.locked():
        problems = [
            f"{project.root}: not registered: run `sabot project check {project.root}`, then `sabot registry lock {project.root}`"
        ]
    with tempfile.TemporaryDirectory(prefix=f"sabot-gate-{project.name}-") as tmp:
        static = static_check(project, Path(tmp))
    problems += static.problems
    if problems:
        raise ProjectError(
            f"{project.name}: refused before any run (`sabot project check {project.root}` shows the same):\n  "
            + "\n  ".join(problems)
        )
    return static.models


def require_priced(ctx, budget: float | None, endpoint_label: str) -> None:
    """A provider wave of a project under a --budget runs only when every model its pipeline asks for
    (and its O4 target) has a price: an unpriced call counts $0, so the budget would protect nothing.
    Without a budget the cap still applies: the unpriced models are named, not refused."""
    from sabot.budget import BudgetError
    from sabot.project_prices import PRICES_FILE, unpriced
    from sabot_assets.waves.budget import is_simulated

    project = getattr(ctx.registry, "project", None)
    if project is None or is_simulated(endpoint_label):
        return
    missing = unpriced(ctx.registry, getattr(ctx, "project_models", set()))
    if not missing:
        return
    where = f"{project.root}/sabot/{PRICES_FILE}"
    what = f"model{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} of {project.name} {'have' if len(missing) > 1 else 'has'} no price"
    if budget is not None:
        raise BudgetError(
            f"{what}, so its calls would count $0 against --budget; price {'them' if len(missing) > 1 else 'it'} in {where} "
            '({"per_million_tokens": {MODEL: {"input": USD, "output": USD}}}); no call was made'
        )
    click.echo(
        f"{project.name}: {what}: spend on {'them' if len(missing) > 1 else 'it'} is not counted against the cap; price "
        f"{'them' if len(missing) > 1 else 'it'} in {where}",
        err=True,
    )


# -- what a project wave did, in plain words ------------------------------------------------------


def _completed(record) -> bool:
    """The run reached its end: no RUN_ERROR, and the team's pipeline did not crash."""
    return record.error is None and not any(e.kind == EventKind.PIPELINE_ERROR for e in record.events)


def project_lines(store_path, wave, project) -> list[str]:
    """Every baseline that failed, with its pass criterion's output; then per operator how its fault
    acts and where it landed, judged only on runs that completed against a passing baseline (any
    other run says why it was not judged, never blames a seam)."""
    from adapters.byo.check import baseline_line
    from sabot.projects import duration_of
    from sabot.store.db import connect
    from sabot.store.runs import read_runs

    probes = wave.probes()
    with connect(store_path, read_only=True) as con:
        runs = read_runs(con, wave.name, [(op, p.key) for op in ("", *wave.operators) for p in probes])
    record = {key: stored.record for key, stored in runs.items() if stored.record is not None}
    baselines = {p.seed: record.get(("", p.key)) for p in probes}
    passed = [
        seed for seed, run in sorted(baselines.items()) if run is not None and run.error is None and run.task_passed
    ]
    lines = [
        f"{wave.name}: baselines (no fault; a cell is scored only where its baseline passed): "
        + (
            f"passed for seed{'s' if len(passed) > 1 else ''} {', '.join(map(str, passed))}"
            if passed
            else "none passed"
        )
    ]
    for seed, run in sorted(baselines.items()):
        if run is None:
            lines.append(f"  baseline seed {seed}: not run")
        elif run.error:
            lines.append(f"  baseline seed {seed}: RUN_ERROR: {run.error}")
        elif not run.task_passed:
            lines.append(baseline_line(run, project))
    if len(passed) < len(baselines):
        lines.append(
            f"  a failing baseline is the pipeline's or its test double's to fix; `sabot project check {project.root}` runs one and shows why"
        )
    lines += anchor_lines(wave.name, project, [r for r in baselines.values() if r is not None and r.error is None])
    lines.append(f"{wave.name}: where each operator's fault landed")
    for op in wave.operators:
        spec = project.operators[op]
        runs_of = [(p.seed, record.get((op, p.key))) for p in probes]
        judged = [
            r
            for seed, r in runs_of
            if r is not None and _completed(r) and baselines[seed] is not None and baselines[seed].task_passed
        ]
        landed = sum(r.injection_verified for r in judged)
        reasons = sorted(
            {
                (r.extra.get("injection") or {}).get("why_not") or "no landing evidence"
                for r in judged
                if not r.injection_verified
            }
        )
        line = f"  {op} ({spec['seam']} seam, {DURATION_WORDS[duration_of(spec)]}): "
        if all(run is None for _, run in runs_of):
            lines.append(line + "not run")
            continue
        line += f"landed {landed}/{len(judged)}" if judged else "nothing to judge"
        line += "".join(f"; INJECTION_UNVERIFIED: {why}" for why in reasons)
        line += "".join(
            f"; not judged: {why} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"
            for why, seeds in _not_judged(runs_of, baselines)
        )
        lines.append(line)
    return lines


DURATION_WORDS = {"once": "acts once", "persists": "persists"}


def anchor_lines(name: str, project, baselines) -> list[str]:
    """The anchor registration rules that need clean baselines (injection-only, false-fire budget),
    one line per refused anchor: such an anchor cannot tie a FLAGS line or a retry reason to the fault."""
    from sabot.anchor_registration import AnchorRules, baseline_problems
    from sabot.parse_rules import FlagsRule
    from sabot.registry import Registry

    registry = Registry()
    flags = (
        FlagsRule.from_doc(registry.doc("standard/flags_protocol.v0.2.0.json"))
        if project.mapping.get("flags_surface")
        else None
    )
    rules, where = AnchorRules.from_registry(registry), f"{project.root.name}/sabot/operators.json"
    refused = [
        line
        for op in project.operator_ids
        for line in baseline_problems(where, op, project.anchors(op), baselines, flags, rules)
    ]
    if not refused:
        return (
            [
                f"{name}: anchors: injected, injection-only and within the false-fire budget on {len(baselines)} clean baseline(s)"
            ]
            if baselines
            else []
        )
    return [
        f"{name}: anchors refused by the registration rules (SPEC v0.2.1 item 4); the board scores them as registered, "
        "so register corrected anchors as a new project (a copied folder):"
    ] + [f"  {line}" for line in refused]


def _not_judged(runs_of, baselines) -> list[tuple[str, list[int]]]:
    """(why, seeds) for the runs whose landing is not judged."""
    why_of = {}
    for seed, run in runs_of:
        baseline = baselines[seed]
        if run is None:
            why_of.setdefault("not run", []).append(seed)
        elif run.error:
            why_of.setdefault("RUN_ERROR (itemized at the end)", []).append(seed)
        elif not _completed(run):
            why_of.setdefault("the pipeline crashed (`sabot explain` shows where)", []).append(seed)
        elif baseline is None or not baseline.task_passed:
            why_of.setdefault("its baseline did not pass", []).append(seed)
    return sorted(why_of.items())


# -- sabot init ---------------------------------------------------------------------------------


@click.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--framework",
    type=click.Choice(SCAFFOLD_FRAMEWORKS),
    default="langgraph",
    show_default=True,
    help="The framework of the pipeline the scaffold starts from.",
)
@click.option("--name", default=None, help="Project name (default: the folder's name).")
def init(directory: Path, framework: str, name: str | None):
    """Scaffold a project folder for a team's own pipeline: sabot/*.json beside its code, a small
    pipeline of the chosen framework, its test double and its pass criterion (each to replace)."""
    guarded(_init, directory, framework, name)


def _init(directory: Path, framework: str, name: str | None):
    import re

    from sabot.registry import RegistryError

    framework = framework.replace("-", "_")  # the project's framework key (agent-framework -> agent_framework)
    name = name or re.sub(r"[^a-z0-9_]", "_", directory.resolve().name.lower())
    target = directory / "sabot"
    if target.exists():
        raise RegistryError(f"{target}: already exists; nothing written")
    scaffold = SCAFFOLDS / framework
    target.mkdir(parents=True)
    written = []
    for template in sorted(scaffold.rglob("*")):
        if template.is_file() and "__pycache__" not in template.parts:
            rel = template.relative_to(scaffold)
            dest = directory / rel
            if dest.exists():
                continue  # never overwrite the team's own files
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(template.read_text().replace("__NAME__", name))
            written.append(str(rel))
    click.echo(f"{directory}: scaffolded {framework} project {name!r}:" + "".join(f"\n  {w}" for w in written))
    click.echo(
        f"next: point sabot/project.json at your pipeline's factory, write the mapping, then "
        f"`sabot project check {directory}` and `sabot registry lock {directory}`"
    )


# -- sabot project check, and the check before a project is registered ------------------------------


@click.group("project")
def project():
    """A team's own pipeline as a project folder (see `sabot init`)."""


@project.command("check")
@click.argument("directory")
def project_check(directory):
    """Build the pipeline; check that every node, route target, task, agent and tool the mapping and
    operators name exists in it (with the near names); run one baseline on the test double and
    print whether it passed, with the pass criterion's output. Exit status 1 when anything fails."""
    require_project(directory)
    with _signals_end_the_command():
        report = guarded(_check, directory)
    if not report.ok:
        raise SystemExit(1)


@contextlib.contextmanager
def _signals_end_the_command():
    """SIGTERM and SIGHUP (a closed terminal, a CI job cancelled) unwind the command as Ctrl-C does,
    so the baseline's pipeline process, in a session of its own, is killed on the way out rather
    than left running (by default Python dies on them without unwinding)."""
    import signal

    def unwind(signum, frame):
        raise SystemExit(128 + signum)

    saved = {signum: signal.signal(signum, unwind) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _check(directory):
    from adapters.byo.check import check

    report = check(directory)
    click.echo("\n".join(report.lines()))
    return report


def lock_project(directory) -> list[str]:
    """`registry lock DIR`: refuse files edited after registration, run the project check, and
    register only when it holds (a failing check freezes nothing)."""
    from sabot.project_registry import pin_registration
    from sabot.projects import Project, ProjectError
    from sabot.store.db import connect, transaction
    from sabot_assets.constants import STORE_PATH

    project = Project.load(directory)
    project.require_lockable()  # an edited registered file is refused before anything runs
    report = _check(directory)
    if not report.ok:
        raise ProjectError(f"{project.name}: the project check failed (above); nothing registered")
    # Pinned in the store before any run of it: the lock file can be edited with the mapping, the pin cannot.
    with connect(STORE_PATH) as con, transaction(con):
        pin_registration(con, project, "registry lock")  # refuses a registration other than the one pinned
        return project.write_lock()  # what it writes is what was pinned: the same files, the same bytes
