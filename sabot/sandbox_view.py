"""What the T3 sandbox sees of the machine: a read-only view of the interpreter, the shared
libraries it and its standard-library extension modules load (found with ldd) and the standard
library, with the machine's site-packages masked; as bwrap arguments, computed once.

Kept apart from `sabot.sandbox`, which runs the code behind the boundary, because the view is
derived from the host's filesystem alone. `SandboxUnavailable` lives here, as the lowest module
that raises it (no ldd, no view); `sabot.sandbox` raises it for its own refusals too.
"""

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

GLIBC_STUBS = ("libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1")


class SandboxUnavailable(RuntimeError):
    """The sandbox tool is missing or unusable here: generated code is refused, never run unconfined."""


@functools.cache
def read_only_view() -> tuple[str, tuple[str, ...]]:
    """The interpreter's path and the bwrap arguments of the read-only view, computed once."""
    python = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    paths = sysconfig.get_paths(
        vars={
            "base": sys.base_prefix,
            "platbase": sys.base_prefix,
            "installed_base": sys.base_prefix,
            "installed_platbase": sys.base_prefix,
        }
    )
    stdlib = {paths["stdlib"], paths["platstdlib"]}
    masked = sorted(
        {paths["purelib"], paths["platlib"]} & {p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)}
    )
    args: list[str] = []
    seen: set[str] = set()
    for path in [python, *_shared_libraries(python, stdlib)]:
        _mirror(path, args, seen)
    for path in sorted(stdlib):
        _mirror(path, args, seen)
    for path in masked:  # other packages of the machine's Python: not the solution's business
        args += ["--tmpfs", path, "--remount-ro", path]
    return python, tuple(args)


def _shared_libraries(python: str, stdlib: set[str]) -> list[str]:
    """Every shared library the interpreter and its standard-library extension modules load (ldd)."""
    binaries = [python, *sorted(p for d in stdlib for p in glob.glob(os.path.join(d, "lib-dynload", "*.so")))]
    ldd = shutil.which("ldd")
    if ldd is None:
        raise SandboxUnavailable("ldd is not on PATH: the sandbox's library view cannot be computed")
    found = set()
    for i in range(0, len(binaries), 40):
        out = subprocess.run([ldd, *binaries[i : i + 40]], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            words = line.split()
            if "=>" in words and len(words) > words.index("=>") + 1 and words[words.index("=>") + 1].startswith("/"):
                found.add(words[words.index("=>") + 1])
            elif words and words[0].startswith("/") and not words[0].endswith(":"):
                found.add(words[0])  # the dynamic loader itself
    libc_dirs = {os.path.dirname(p) for p in found if os.path.basename(p) == "libc.so.6"}
    # The C library's compatibility stubs, which older native code still links against.
    found |= {os.path.join(d, n) for d in libc_dirs for n in GLIBC_STUBS if os.path.exists(os.path.join(d, n))}
    return sorted(found)


def _mirror(path: str, args: list[str], seen: set[str]) -> None:
    """bwrap arguments that make `path` resolve inside as it does outside: each symlink on the way
    re-created, the file or directory at the end bound read-only."""
    parts = Path(os.path.normpath(path)).parts
    for i in range(2, len(parts) + 1):
        prefix = os.path.join(*parts[:i])
        if os.path.islink(prefix):
            if prefix not in seen:
                _parents(parts[:i], args, seen)
                seen.add(prefix)
                args += ["--symlink", os.readlink(prefix), prefix]
            target = os.path.join(os.path.dirname(prefix), os.readlink(prefix), *parts[i:])
            _mirror(os.path.normpath(target), args, seen)
            return
    if path not in seen and os.path.exists(path):
        _parents(parts, args, seen)
        seen.add(path)
        args += ["--ro-bind", path, path]


def _parents(parts: tuple[str, ...], args: list[str], seen: set[str]) -> None:
    """Create the parent directories 0755 first: bwrap would make them 0700, unreadable after the drop."""
    for i in range(2, len(parts)):
        parent = os.path.join(*parts[:i])
        if parent not in seen:
            seen.add(parent)
            args += ["--perms", "0755", "--dir", parent]
