"""Run untrusted generated Python code so that whatever it does ends as a failed run, not a hurt harness.

The code (an LLM's `solution.py` plus hidden tests) may loop forever, fork-bomb, open connections,
write outside its directory, print gigabytes or allocate huge memory. Containment, outermost first:

- kernel: a child process in its own session under resource limits (address space, CPU, file size,
  open files, processes, no core dumps), its whole process group SIGKILLed when the run ends. Where
  `unshare` works (root on Linux) the child also gets fresh user, network and PID namespaces: no
  network at all, none of the host's capabilities (mknod, mount, ...) although it runs as uid 0, and
  every process it manages to start dies with it;
- a throwaway directory as its cwd and HOME, deleted afterwards, even on errors;
- an audit hook installed before the user's code runs (`_BOOT`), refusing process creation,
  sockets, ctypes and writes outside the directory. Defence in depth only, see there.
"""

import dataclasses
import functools
import math
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FILE_SIZE_LIMIT = 8 * 2**20  # per file written, stdout and stderr included
OPEN_FILES_LIMIT = 64
PROCESS_LIMIT = 16  # not enforced for root by the kernel: the audit hook also refuses to fork
# Fresh user, network and PID namespaces. The user namespace maps root to root, so the interpreter
# (under /root here) stays readable, but strips host capabilities. --fork makes the child the init
# of the PID namespace: when it dies the kernel kills every process left in there.
UNSHARE_FLAGS = ("--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child")
# unshare (util-linux 2.38) cannot re-raise a SIGKILL that ended its child: it prints this and exits 1.
UNSHARE_LOST_SIGKILL = "unshare: sigprocmask unblock failed"

# The child's first code. Audit hooks are defence in depth, NOT a security boundary: C extensions
# (cffi and uvloop sit in the venv), dir_fd-relative calls and unaudited calls such as os.mknod get
# past them. The boundary is the process limits, the namespaces and the throwaway directory; the
# hook turns ordinary mischief into a clear PermissionError early.
_BOOT = r'''
import os, runpy, sys
import _posixsubprocess, subprocess
from _socket import AF_UNIX

ROOT, ENTRY = os.path.realpath(sys.argv[1]), sys.argv[2]
PROCESS = {"os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.system", "pty.spawn",
           "subprocess.Popen", "os.kill", "os.killpg", "ctypes.dlopen"}
# Events that change the file system at every path among their arguments.
CHANGES = {"os.chmod", "os.chown", "os.link", "os.mkdir", "os.remove", "os.rename", "os.rmdir",
           "os.symlink", "os.truncate", "os.utime", "shutil.rmtree", "sqlite3.connect"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def refuse(what):
    raise PermissionError(f"sandbox: {what} is not allowed")


def inside(path):
    if isinstance(path, int):  # an already-open descriptor
        return True
    real = os.path.realpath(os.fsdecode(path))
    return real == os.devnull or os.path.commonpath([real, ROOT]) == ROOT


def guard(event, args):
    if event in PROCESS:
        refuse(event)
    # A fresh copy of _posixsubprocess would bring back the real fork_exec, which is not audited.
    if event == "import" and args[0] == "_posixsubprocess":
        refuse("reloading _posixsubprocess")
    # asyncio's event loop needs an AF_UNIX socketpair; nothing else about sockets is allowed.
    if event.startswith("socket.") and not (event == "socket.__new__" and args[1] == AF_UNIX):
        refuse(event)
    if event == "open":
        path, mode, flags = args
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
        if writing and not inside(path):
            refuse(f"writing {path!r}")
    if event in CHANGES and not all(inside(a) for a in args if isinstance(a, (str, bytes, os.PathLike))):
        refuse(f"{event} outside the sandbox")


def fork_exec(*args):
    refuse("process creation")


# subprocess keeps its own reference to fork_exec, so both are replaced before any user code runs.
_posixsubprocess.fork_exec = subprocess._fork_exec = fork_exec
sys.addaudithook(guard)
sys.argv = [ENTRY]
sys.path.insert(0, os.path.dirname(os.path.abspath(ENTRY)))  # as `python ENTRY` would
runpy.run_path(ENTRY, run_name="__main__")
'''


@dataclass(frozen=True)
class SandboxResult:
    ok: bool  # exited 0 within every limit, the output cap included
    returncode: int | None  # None when timed out; negative: killed by that signal
    timed_out: bool
    stdout: str  # truncated to max_output characters
    stderr: str  # truncated to max_output characters
    reason: str  # "" when ok, else e.g. "exit status 1; output truncated at 64000 bytes"


def run_python(files: dict[str, str], entry: str, *, timeout: float = 10.0, memory_mb: int = 512,
               max_output: int = 64_000, python: str | None = None) -> SandboxResult:
    """Write `files` into a fresh temporary directory, run `python entry` there, clean up.

    Output beyond `max_output` bytes per stream is dropped and fails the run: a verdict should not
    rest on output nobody saw.
    """
    with tempfile.TemporaryDirectory(prefix="sabot-sandbox-") as tmp:
        base = Path(tmp).resolve()  # private to the harness: the bootstrap and the captured output
        work = base / "work"  # the child's cwd and HOME, the only place it may write
        work.mkdir()
        for name, text in files.items():
            path = _inside(work, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _inside(work, entry)  # refuses an entry outside the directory
        boot = base / "_sandbox_boot.py"
        boot.write_text(_BOOT, encoding="utf-8")

        command = [python or sys.executable, "-I", "-B", str(boot), str(work), entry]
        unshare = _unshare()
        if unshare:
            command = [unshare, *UNSHARE_FLAGS, *command]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work), "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1"}
        # Files, not pipes: nothing to drain, so no deadlock, and RLIMIT_FSIZE bounds the disk used.
        with open(base / "stdout", "w+b") as out, open(base / "stderr", "w+b") as err:
            proc = subprocess.Popen(command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True, preexec_fn=_limits(timeout, memory_mb))
            try:
                proc.wait(timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
            stdout, stdout_cut = _read_capped(out, max_output)
            stderr, stderr_cut = _read_capped(err, max_output)
            returncode = None if timed_out else proc.returncode
            if unshare and returncode == 1 and UNSHARE_LOST_SIGKILL in _tail(err):
                returncode = -signal.SIGKILL

    truncated = stdout_cut or stderr_cut
    reasons = []
    if timed_out:
        reasons.append(f"timed out after {float(timeout)} s")
    elif returncode < 0:
        hint = " (memory or CPU limit)" if -returncode in (signal.SIGKILL, signal.SIGXCPU) else ""
        reasons.append(f"killed by signal {-returncode}{hint}")
    elif returncode > 0:
        reasons.append(f"exit status {returncode}")
    if truncated:
        reasons.append(f"output truncated at {max_output} bytes")
    return SandboxResult(ok=not reasons, returncode=returncode, timed_out=timed_out, stdout=stdout,
                         stderr=stderr, reason="; ".join(reasons))


def run_tests(solution: str, tests: str, *, module: str = "solution", timeout: float = 10.0) -> SandboxResult:
    """Convenience: files {module + '.py': solution, 'test_hidden.py': tests}; the tests file is a plain
    script of asserts (no pytest dependency) that imports the module; ok means every assert passed."""
    # Exit status 0 alone is forgeable (`os._exit(0)` on import): the tests must also reach their
    # last line, which prints a fresh nonce the solution cannot guess in advance.
    done = f"sabot-tests-complete-{secrets.token_hex(8)}"
    files = {f"{module}.py": solution, "test_hidden.py": f"{tests}\n\nprint({done!r})\n"}
    result = run_python(files, "test_hidden.py", timeout=timeout)
    if result.ok and done not in result.stdout:
        return dataclasses.replace(result, ok=False, reason="the tests did not run to completion")
    return result


def network_isolation() -> str:
    """"netns" when children run in fresh namespaces (no network at all), else "audit-hook"."""
    return "netns" if _unshare() else "audit-hook"


@functools.cache
def _unshare() -> str | None:
    """unshare's path if it works here, found once by a trial under the same limits: it needs
    privileges, and must be able to fork within them."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    try:
        trial = subprocess.run([unshare, *UNSHARE_FLAGS, "true"], env={"PATH": "/usr/bin:/bin"},
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=10, preexec_fn=_limits(timeout=1, memory_mb=256))
    except (OSError, subprocess.SubprocessError):
        return None
    return unshare if trial.returncode == 0 else None


def _limits(timeout: float, memory_mb: int) -> Callable[[], None]:
    """The child's resource limits, set between fork and exec (and inherited through unshare)."""
    limits = {
        resource.RLIMIT_AS: memory_mb * 2**20,
        resource.RLIMIT_CPU: math.ceil(timeout) + 1,  # a backstop; the wall-clock timeout comes first
        resource.RLIMIT_NPROC: PROCESS_LIMIT,
        resource.RLIMIT_FSIZE: FILE_SIZE_LIMIT,
        resource.RLIMIT_NOFILE: OPEN_FILES_LIMIT,
        resource.RLIMIT_CORE: 0,
    }

    def apply() -> None:
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))

    return apply


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group, reap the child, and wait (briefly) until the group is gone:
    under unshare the sandboxed interpreter is unshare's child, reaped by init rather than by us."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def _inside(root: Path, name: str) -> Path:
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise ValueError(f"sandbox file {name!r} lies outside the sandbox directory")
    return path


def _read_capped(f, cap: int) -> tuple[str, bool]:
    """The first `cap` bytes of a captured stream as text, and whether there was more."""
    f.seek(0)
    data = f.read(cap + 1)
    return data[:cap].decode("utf-8", errors="replace"), len(data) > cap


def _tail(f) -> str:
    f.seek(max(0, os.fstat(f.fileno()).st_size - 200))
    return f.read().decode("utf-8", errors="replace")
