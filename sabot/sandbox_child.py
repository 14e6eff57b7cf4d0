"""The sandboxed interpreter's first code: it runs INSIDE bubblewrap (see `sabot.sandbox`), never in
the harness. The harness binds this file read-only at /sabot/child.py and starts
`python -I -S -B /sabot/child.py STARTED_FD UID MODE ...` with only the standard library in view.

Order matters: it reads its inputs (root-only files), drops root for the run's own unprivileged uid (so the kernel's process limit
holds), checks that no capability is left, writes the run's files into the writable tmpfs (its cwd),
installs an audit hook, and only then runs anything of the solution's.

Modes:
  script ENTRY              run ENTRY as `python ENTRY` would; the exit status is the result;
  calls MODULE FUNCTION     import MODULE, call FUNCTION once per argument list in /sabot/calls.json
                            and write what each call returned or raised, as JSON, on the report
                            descriptor. The harness compares; nothing here knows an expected value.

The audit hook is defence in depth, NOT the boundary (C extensions, ctypes through a bypass,
dir_fd-relative calls get past hooks): it turns ordinary mischief into a clear PermissionError.
"""

import base64
import json
import os
import sys

WORK = "/tmp"  # the one writable tmpfs: cwd, HOME and TMPDIR
FILES = "/sabot/files.json"
CALLS = "/sabot/calls.json"


def drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    if os.getuid() != uid or any(int(status[k], 16) for k in ("CapPrm", "CapEff", "CapAmb")):
        sys.exit("sandbox: could not drop privileges")
    if status.get("NoNewPrivs", "0").strip() != "1":
        sys.exit("sandbox: no_new_privs is not set")


def read_json(path: str):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_files(files: dict) -> None:
    for name, content in files.items():
        path = os.path.join(WORK, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(base64.b64decode(content))


def install_audit_hook() -> None:
    import _posixsubprocess
    import subprocess
    from _socket import AF_UNIX

    process = {
        "os.exec",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.system",
        "pty.spawn",
        "subprocess.Popen",
        "os.kill",
        "os.killpg",
        "ctypes.dlopen",
    }
    changes = {
        "os.chmod",
        "os.chown",
        "os.link",
        "os.mkdir",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.symlink",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "sqlite3.connect",
    }
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def refuse(what):
        raise PermissionError(f"sandbox: {what} is not allowed")

    def inside(path):
        if isinstance(path, int):  # an already-open descriptor
            return True
        real = os.path.realpath(os.fsdecode(path))
        return real == os.devnull or os.path.commonpath([real, WORK]) == WORK

    def guard(event, args):
        if event in process:
            refuse(event)
        # A fresh copy of _posixsubprocess would bring back the real fork_exec, which is not audited.
        if event == "import" and args[0] == "_posixsubprocess":
            refuse("reloading _posixsubprocess")
        # asyncio's event loop needs an AF_UNIX socketpair; nothing else about sockets is allowed.
        if event.startswith("socket.") and not (event == "socket.__new__" and args[1] == AF_UNIX):
            refuse(event)
        if event == "open":
            path, mode, flags = args
            writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & write_flags)
            if writing and not inside(path):
                refuse(f"writing {path!r}")
        if event in changes and not all(inside(a) for a in args if isinstance(a, (str, bytes, os.PathLike))):
            refuse(f"{event} outside the sandbox")

    def fork_exec(*args):
        refuse("process creation")

    # subprocess keeps its own reference to fork_exec, so both are replaced before any user code runs.
    _posixsubprocess.fork_exec = subprocess._fork_exec = fork_exec
    sys.addaudithook(guard)


def run_script(entry: str) -> None:
    import runpy

    sys.argv = [entry]
    sys.path.insert(0, os.path.dirname(os.path.abspath(entry)))  # as `python ENTRY` would
    runpy.run_path(entry, run_name="__main__")


def run_calls(calls: list, module: str, function: str) -> None:
    """One JSON list on the report descriptor (the original stdout): per call {"returned": value},
    {"raised": [exception class names, most derived first]} or {"unrepresentable": type name}."""
    import importlib

    dumps = json.dumps
    report = os.dup(1)
    os.dup2(2, 1)  # the solution's own prints go to stderr: the report descriptor carries the report only
    sys.path.insert(0, WORK)
    fn = getattr(importlib.import_module(module), function)
    parts = []
    for args in calls:
        try:
            value = fn(*args)
        except Exception as exc:  # noqa: BLE001 - what it raised is the datum
            parts.append(dumps({"raised": [c.__name__ for c in type(exc).__mro__]}))
            continue
        try:
            parts.append('{"returned": ' + dumps(value) + "}")
        except (TypeError, ValueError, RecursionError):
            parts.append(dumps({"unrepresentable": type(value).__name__}))
    data = ("[" + ", ".join(parts) + "]\n").encode()
    while data:
        data = data[os.write(report, data) :]


def main() -> None:
    started, uid, mode, *rest = sys.argv[1:]
    os.write(int(started), b"started\n")  # tells the harness the sandbox was set up
    os.close(int(started))
    # Read as root, before the drop: the data files are root's (0600), out of the solution's reach.
    files, calls = read_json(FILES), read_json(CALLS)
    drop_privileges(int(uid))
    os.chdir(WORK)
    write_files(files)
    install_audit_hook()
    if mode == "script":
        run_script(*rest)
    elif mode == "calls":
        run_calls(calls, *rest)
    else:
        sys.exit(f"sandbox: unknown mode {mode!r}")


if __name__ == "__main__":
    main()
