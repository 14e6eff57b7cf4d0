"""Where scored code runs: a bubblewrap sandbox that sees only what a run needs, never the evidence.

A pipeline's process is started inside `bwrap` (Debian's bubblewrap, the T3 sandbox's tool too) with
its own user, PID, IPC and UTS namespaces, dying with the harness (`--die-with-parent`), all
capabilities dropped. Its filesystem is built from nothing but:

- the system's read-only trees (/usr and its links, /etc) and the Python environment (the
  interpreter's prefixes, every import path, the harness's own code tree), read-only;
- the project folder being scored, read-only;
- the run's scratch directory (its cwd and HOME), the only place it may write, and a private /tmp;
- its own /proc (its PID namespace: no other process of the host is listed) and a minimal /dev.

What the harness keeps to itself is masked by an empty read-only directory (or /dev/null for a
file), even where a read-only tree would include it:
SABOT_VAR (the store, the run root with every other attempt, the store's seal key, other runs'
scratch, the breakers' state), the store's directory, the seal key and signing key files. The
environment it starts with has no SABOT_* or DAGSTER_* setting and no value holding a secret; the
provider key lives only in the gateway's process, which the pipeline reaches over its loopback port.

Where it applies: a team's pipeline (adapters/byo: a fresh interpreter per run), a team's test
double (adapters/byo/double.py: a sandbox of its own per run, serving on a loopback socket the
harness bound and handed in) and the built-in
rows (adapters/confined_server.py: one sandboxed fork server per command, preloading the
frameworks, forking one child per run; each child also enters a user and mount namespace of its
own that hides the other runs' scratch, drops every capability and is not dumpable, so runs in
flight cannot read each other's /proc). A built-in row's child sees the system, the Python
environment and the harness's code (read-only), its own scratch directory and a private /tmp; the
run's gateway, scripted model, exchange journal, run root and sealing stay in the harness's run
process, which takes back the pipeline's events as JSON (never unpickled); a team's pipeline and
test double answer as JSON too.

What this is not: a network boundary. The pipeline shares the host's network namespace (its model
endpoint is the gateway on 127.0.0.1), so a loopback service that trusts any local caller is
reachable from it.
"""

import os
import shutil
import sys
from pathlib import Path

BWRAP = "bwrap"
HARNESS_ROOT = Path(__file__).resolve().parents[1]
HARNESS_ENV_PREFIXES = ("SABOT_", "DAGSTER_")
NAMESPACES = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--hostname",
    "pipeline",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
)
SYSTEM_TREES = ("/usr", "/etc", "/opt")


class ConfinementUnavailable(RuntimeError):
    """bubblewrap is missing or cannot start here: a pipeline is never run unconfined."""


def require_bwrap() -> str:
    found = shutil.which(BWRAP)
    if found is None:
        raise ConfinementUnavailable(
            f"the confinement tool {BWRAP!r} is not on PATH: a pipeline is not run where it could read the "
            "store and its key; install bubblewrap (bash scripts/install_bubblewrap.sh)"
        )
    return found


def harness_paths(environ=os.environ) -> list[Path]:
    """What the pipeline must not see, wherever it lies: SABOT_VAR (default: the harness's var/), the
    store's directory, the seal and signing keys, the breakers' directory."""
    paths = [Path(environ.get("SABOT_VAR") or HARNESS_ROOT / "var")]
    if environ.get("SABOT_DB"):
        paths.append(Path(environ["SABOT_DB"]).parent)
    paths += [
        Path(environ[name])
        for name in ("SABOT_SEAL_KEY_FILE", "SABOT_SIGNING_KEY", "SABOT_LIMITER_DIR", "SABOT_DAGSTER_STORAGE")
        if environ.get(name)
    ]
    return [p.absolute() for p in paths]


def confined_environment(environ: dict) -> dict:
    """The environment without the harness's own settings (where its store, keys and state live)."""
    return {k: v for k, v in environ.items() if not k.startswith(HARNESS_ENV_PREFIXES)}


def confined_command(argv: list[str], scratch: Path, readable: list[Path], environ=os.environ) -> list[str]:
    """`argv` run inside the sandbox: `scratch` read-write (its cwd), `readable` read-only beside the
    system, the Python environment and the harness's code; the harness's own paths masked."""
    bwrap = require_bwrap()
    scratch = Path(scratch).absolute()
    args = [bwrap, *NAMESPACES]
    for tree in SYSTEM_TREES:
        args += ["--ro-bind-try", tree, tree]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):  # merged-/usr links, or real trees on older systems
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    bound = _readable_trees(readable)
    for tree in bound:
        args += ["--ro-bind", str(tree), str(tree)]
    masked = []
    for hidden in sorted(set(harness_paths(environ)), key=lambda p: len(p.parts)):
        if any(_within(hidden, outer) for outer in masked):
            continue  # already out of sight (and a mount point made inside would show its name)
        if hidden.exists():  # masked even where nothing bound shows it: its path then stays unwritable too
            if hidden.is_dir():
                args += ["--tmpfs", str(hidden)]
                masked.append(hidden)
            else:
                args += ["--ro-bind", "/dev/null", str(hidden)]
    args += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    for hidden in masked:  # read-only once the scratch's mount point is made in it: nothing can be left there
        args += ["--remount-ro", str(hidden)]
    return [*args, "--", *argv]


def _readable_trees(readable: list[Path]) -> list[Path]:
    """The read-only trees, outermost first, none inside another (a bind inside a bound tree is redundant)."""
    candidates = [
        HARNESS_ROOT,
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.executable).parent,
        *(Path(p) for p in sys.path if p),
        *map(Path, readable),
    ]
    trees: list[Path] = []
    for path in sorted({p.absolute() for p in candidates if p.exists()}, key=lambda p: len(p.parts)):
        if (
            path.is_dir()
            and not any(_within(path, tree) for tree in trees)
            and not any(_within(path, Path(t)) for t in SYSTEM_TREES)
        ):
            trees.append(path)
    return trees


def _within(path: Path, tree: Path) -> bool:
    return path == tree or tree in path.parents


def confined_pids(bwrap_pid: int) -> list[int]:
    """The processes running inside the sandbox bwrap `bwrap_pid` started (its own two processes left
    out): what a stack dump is asked of."""
    found, queue = [], [bwrap_pid]
    while queue:
        pid = queue.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                queue.append(child)
                try:
                    if Path(f"/proc/{child}/comm").read_text().strip() != BWRAP:
                        found.append(child)
                except OSError:
                    pass
    return found
