"""Run untrusted generated Python code behind a real boundary, so that whatever it does ends as a
failed run, never as a hurt harness or a forged pass.

The boundary is bubblewrap (Debian's `bubblewrap`, `bwrap`), run by the harness; nothing is
hand-rolled. Inside it the code gets:

- a minimal READ-ONLY view (`sabot.sandbox_view`): the interpreter, the shared libraries it and
  its standard-library extension modules load (found with ldd), and the standard library with
  site-packages masked. No project tree, no store, no `data/`, no harness venv, no /etc, /root,
  /home or /usr/bin;
- ONE writable tmpfs, /tmp, of `TMPFS_SIZE` bytes: cwd, HOME and TMPDIR;
- no network (a fresh network namespace with only its own loopback), its own PID, IPC and UTS
  namespaces, every process dying with the run (`--die-with-parent`, the PID namespace's init);
- a fresh unprivileged uid per run (`sandbox_child.drop_privileges`), so the kernel's process
  limit RLIMIT_NPROC holds (it never binds root), no capabilities and no_new_privs;
- ONE memory bound for the whole run, every process and the tmpfs together: a memory cgroup of
  its own where the kernel offers one, else per-process address-space limits whose product stays
  under the bound (`sabot.sandbox_memory`);
- resource limits: address space, CPU seconds, file size (stdout and stderr included), open files,
  processes, no core dumps;
- a seccomp filter (`sabot.sandbox_seccomp`) loaded by bwrap before the interpreter starts;
- an audit hook in the child: defence in depth only, for clear errors on ordinary mischief.

Without bwrap nothing runs: `SandboxUnavailable` (`sabot.sandbox_view`) is raised, there is no fallback.

`run_calls` is how a pass is decided without trusting the code: the child returns what the
solution returned for given inputs, as data, and the caller compares against expected values that
never enter the sandbox (`sabot.tasks._pass_t3`). Nothing the code prints, exits with or patches
can turn a wrong answer into a pass.
"""

import base64
import json
import math
import os
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sabot import sandbox_memory
from sabot.sandbox_seccomp import filter_bpf
from sabot.sandbox_view import SandboxUnavailable, read_only_view

BWRAP = "bwrap"
INSTALL_HINT = "install Debian's bubblewrap (`apt-get install bubblewrap`; scripts/setup.sh does)"
FILE_SIZE_LIMIT = 8 * 2**20  # per file written, stdout and stderr included
TMPFS_SIZE = 32 * 2**20  # the one writable directory
OPEN_FILES_LIMIT = 64
PROCESS_LIMIT = 16  # for the run's own uid: enforced by the kernel because that uid is not root
BWRAP_PROCESSES = 2  # bwrap's own, outside and as the sandbox's init: root's, so not counted above
UID_RANGE = (200_000, 300_000)  # a fresh uid per run: concurrent runs never share a process count
CHILD = Path(__file__).with_name("sandbox_child.py")
# bwrap exits 128 + N when the command was killed by signal N.
SIGNAL_BASE = 128


@dataclass(frozen=True)
class SandboxResult:
    ok: bool  # exited 0 within every limit, the output cap included
    returncode: int | None  # None when timed out; negative: killed by that signal
    timed_out: bool
    stdout: str  # truncated to max_output characters
    stderr: str  # truncated to max_output characters
    reason: str  # "" when ok, else e.g. "exit status 1; output truncated at 64000 bytes"
    memory_bound: int = 0  # bytes, for every process of the run together
    memory_bounded_by: str = ""  # "cgroup v1", "cgroup v2" or "per-process limits"
    memory_peak: int | None = None  # bytes, the most the run held at once (a cgroup's count; None without one)


@dataclass(frozen=True)
class CallsResult:
    """What `run_calls` brought back: one outcome per call, or None with the reason when the run broke."""

    outcomes: list[dict] | None  # [{"returned": v} | {"raised": [names]} | {"unrepresentable": type}]
    run: SandboxResult
    reason: str  # "" when outcomes is a well-formed list of the right length


def run_python(
    files: dict[str, str | bytes], entry: str, *, timeout: float = 10.0, memory_mb: int = 512, max_output: int = 64_000
) -> SandboxResult:
    """Copy `files` into the sandbox's tmpfs and run `python entry` there; `memory_mb` bounds the
    memory of every process of the run together.

    Output beyond `max_output` bytes per stream is dropped and fails the run: a verdict should not
    rest on output nobody saw.
    """
    _check_names(files, entry)
    return _run(files, ["script", entry], None, timeout=timeout, memory_mb=memory_mb, max_output=max_output)


def run_calls(
    files: dict[str, str | bytes],
    module: str,
    function: str,
    calls: Sequence[Sequence],
    *,
    timeout: float = 10.0,
    memory_mb: int = 512,
    max_output: int = 64_000,
) -> CallsResult:
    """Import `module` inside the sandbox and call `function(*args)` for each argument list in
    `calls`; return each call's outcome as data. The sandbox never sees an expected value."""
    _check_names(files, f"{module}.py")
    run = _run(
        files,
        ["calls", module, function],
        list(map(list, calls)),
        timeout=timeout,
        memory_mb=memory_mb,
        max_output=max_output,
    )
    if not run.ok:
        last = run.stderr.strip().splitlines()[-1:] or [""]
        return CallsResult(None, run, f"{run.reason}: {last[0][:200]}" if last[0] else run.reason)
    try:
        outcomes = json.loads(run.stdout)
    except (ValueError, RecursionError) as exc:  # not JSON, nested past the parser, a number past int's limit
        return CallsResult(None, run, f"the run wrote no well-formed report ({type(exc).__name__})")
    if not (
        isinstance(outcomes, list)
        and len(outcomes) == len(calls)
        and all(
            isinstance(o, dict) and len(o) == 1 and next(iter(o)) in ("returned", "raised", "unrepresentable")
            for o in outcomes
        )
    ):
        return CallsResult(None, run, f"the report is not {len(calls)} call outcomes")
    return CallsResult(outcomes, run, "")


def require_sandbox() -> str:
    """bwrap's path; raises SandboxUnavailable, naming what is missing, when it is not installed."""
    found = shutil.which(BWRAP)
    if found is None:
        raise SandboxUnavailable(
            f"the sandbox tool {BWRAP!r} is not on PATH: generated code is not run without it; {INSTALL_HINT}"
        )
    if os.geteuid() != 0:
        # Only root can hand each run a uid of its own; under the caller's uid the process limit would
        # count the caller's other processes, and bwrap's privileged options are refused.
        raise SandboxUnavailable(
            "the T3 sandbox must be started by root: it runs each solution under a fresh "
            "unprivileged uid of its own, which only root can hand out"
        )
    return found


def _run(
    files: dict[str, str | bytes],
    mode: list[str],
    calls: list | None,
    *,
    timeout: float,
    memory_mb: int,
    max_output: int,
) -> SandboxResult:
    bwrap = require_sandbox()
    python, view = read_only_view()
    uid = str(secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) + UID_RANGE[0])
    with tempfile.TemporaryDirectory(prefix="sabot-sandbox-") as tmp:
        base = Path(tmp)  # the harness's side only: never bound into the sandbox
        payload = {
            "child.py": CHILD.read_bytes(),
            "seccomp.bpf": filter_bpf(),
            "files.json": json.dumps({n: base64.b64encode(_bytes(t)).decode() for n, t in files.items()}).encode(),
        }
        if calls is not None:
            payload["calls.json"] = json.dumps(calls).encode()
        fds = {}
        for name, data in payload.items():
            (base / name).write_bytes(data)
            fds[name] = os.open(base / name, os.O_RDONLY)
        # bwrap reports the host pid of the sandbox's init here (what to kill); the child marks
        # "started" before any of the solution's code runs, so its absence means setup failed.
        for name in ("status", "started"):
            fds[name] = os.open(base / name, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            data_args = [
                a
                for name in ("child.py", "files.json", "calls.json")
                if name in fds
                for a in ("--ro-bind-data", str(fds[name]), f"/sabot/{name}")
            ]
            command = [
                bwrap,
                *NAMESPACES,
                *view,
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--size",
                str(TMPFS_SIZE),
                "--perms",
                "1777",
                "--tmpfs",
                "/tmp",
                *data_args,
                "--seccomp",
                str(fds["seccomp.bpf"]),
                "--json-status-fd",
                str(fds["status"]),
                "--chdir",
                "/tmp",
                "--",
                python,
                "-I",
                "-S",
                "-B",
                "/sabot/child.py",
                str(fds["started"]),
                uid,
                *mode,
            ]
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": "/tmp",
                "TMPDIR": "/tmp",
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
            cgroup = sandbox_memory.create(memory_mb * 2**20)
            try:
                return _supervise(command, env, tuple(fds.values()), base, timeout, memory_mb, max_output, cgroup)
            finally:
                if cgroup is not None:
                    cgroup.remove()
        finally:
            for fd in fds.values():
                os.close(fd)


# Every namespace but the user namespace: without one, the child's uid is a real host uid, and the
# kernel's process limit applies to it. Capabilities: only what dropping to that uid needs.
NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--cap-add",
    "CAP_SETUID",
    "--cap-add",
    "CAP_SETGID",
)


def _supervise(
    command: list[str],
    env: dict,
    fds: tuple[int, ...],
    base: Path,
    timeout: float,
    memory_mb: int,
    max_output: int,
    cgroup: sandbox_memory.MemoryCgroup | None,
) -> SandboxResult:
    # Files, not pipes: nothing to drain, so no deadlock, and RLIMIT_FSIZE bounds the disk used.
    with open(base / "stdout", "w+b") as out, open(base / "stderr", "w+b") as err:
        proc = subprocess.Popen(
            command,
            cwd=base,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            pass_fds=fds,
            start_new_session=True,
            preexec_fn=_limits(timeout, memory_mb, cgroup),
        )
        try:
            proc.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc, base / "status")
        stdout, stdout_cut = _read_capped(out, max_output)
        stderr, stderr_cut = _read_capped(err, max_output)
    returncode = None if timed_out else proc.returncode
    if returncode is not None and returncode > SIGNAL_BASE:
        returncode = SIGNAL_BASE - returncode
    if not timed_out and (base / "started").read_bytes() != b"started\n":
        raise SandboxUnavailable(
            f"{BWRAP} could not set up the sandbox (exit status {proc.returncode}): {stderr.strip()[:300]}"
        )
    reasons = []
    if timed_out:
        reasons.append(f"timed out after {float(timeout)} s")
    elif returncode < 0:
        hint = " (memory or CPU limit)" if -returncode in (signal.SIGKILL, signal.SIGXCPU) else ""
        reasons.append(f"killed by signal {-returncode}{hint}")
    elif returncode > 0:
        reasons.append(f"exit status {returncode}")
    if stdout_cut or stderr_cut:
        reasons.append(f"output truncated at {max_output} bytes")
    killed_for_memory = cgroup.oom_kills() if cgroup else 0
    if killed_for_memory:
        reasons.append(f"memory bound of {memory_mb} MB reached ({killed_for_memory} process(es) ended by the kernel)")
    return SandboxResult(
        ok=not reasons,
        returncode=returncode,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
        reason="; ".join(reasons),
        memory_bound=memory_mb * 2**20,
        memory_bounded_by=cgroup.label if cgroup else "per-process limits",
        memory_peak=cgroup.peak() if cgroup else None,
    )


def address_space_limit(memory_mb: int, cgroup: sandbox_memory.MemoryCgroup | None) -> int:
    """Each process's address-space limit: the whole bound inside a cgroup (which bounds the sum);
    without one, a share small enough that every process a run may hold, and the tmpfs, fit in it."""
    bound = memory_mb * 2**20
    return bound if cgroup else sandbox_memory.per_process_limit(bound, PROCESS_LIMIT + BWRAP_PROCESSES, TMPFS_SIZE)


def _limits(timeout: float, memory_mb: int, cgroup: sandbox_memory.MemoryCgroup | None) -> Callable[[], None]:
    """The resource limits, set between fork and exec (after joining the run's cgroup); bwrap and
    the child inherit them."""
    limits = {
        resource.RLIMIT_AS: address_space_limit(memory_mb, cgroup),
        resource.RLIMIT_CPU: math.ceil(timeout) + 1,  # a backstop; the wall-clock timeout comes first
        resource.RLIMIT_NPROC: PROCESS_LIMIT,
        resource.RLIMIT_FSIZE: FILE_SIZE_LIMIT,
        resource.RLIMIT_NOFILE: OPEN_FILES_LIMIT,
        resource.RLIMIT_CORE: 0,
    }

    def apply() -> None:
        if cgroup is not None:
            cgroup.enter()
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))

    return apply


def _kill_group(proc: subprocess.Popen, status: Path) -> None:
    """SIGKILL the sandbox's init (the kernel then kills every process of its PID namespace) and
    bwrap's process group, reap bwrap, and wait (briefly) until the init is gone too."""
    init = _sandbox_init(status)
    for kill, pid in ((os.kill, init), (os.killpg, proc.pid)):
        if pid is not None:
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait()
    deadline = time.monotonic() + 5
    while init is not None and time.monotonic() < deadline and _alive(init):
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """Whether `pid` is running. A zombie init is not: the kernel empties its PID namespace before
    the init becomes one, and reaping it is up to whoever adopted it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _sandbox_init(status: Path) -> int | None:
    """The host pid of the sandbox's init, from bwrap's --json-status-fd report (None before setup)."""
    for line in status.read_text(errors="replace").splitlines():
        try:
            pid = json.loads(line).get("child-pid")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(pid, int) and pid > 1:
            return pid
    return None


def _check_names(files: dict, entry: str) -> None:
    for name in [*files, entry]:
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts:
            raise ValueError(f"sandbox file {name!r} lies outside the sandbox directory")


def _bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def _read_capped(f, cap: int) -> tuple[str, bool]:
    """The first `cap` bytes of a captured stream as text, and whether there was more."""
    f.seek(0)
    data = f.read(cap + 1)
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap
