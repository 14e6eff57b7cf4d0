"""One memory bound for the whole T3 sandbox (`sabot.sandbox`), not one per process.

Where the kernel offers a memory cgroup the harness may create, every process of a run lives in a
cgroup of its own, made before bwrap starts and limited to the bound: the kernel counts the sum of
the run's memory (anonymous memory, page cache and the tmpfs pages it writes), and when the sum
reaches the bound its OOM killer ends a process of that run, never one of the host's. The cgroup's
peak and OOM kills are read back before it is removed, so a run reports what it used.

Where no such cgroup can be made (no memory controller, or none delegated to this process), the
per-process address-space limit stands in, small enough that every process a run may hold together,
with the tmpfs, stays under the same bound (`per_process_limit`).

Both cgroup versions are handled: v1 (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`) and
v2 (`memory.max`, `memory.swap.max`). Nothing beyond writing a few control files is needed, so no
library is used (the Python cgroup packages are v1-only or unmaintained).
"""

import functools
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "sabot-sandbox-"
REMOVE_WAIT = 5.0  # seconds for the killed processes to leave the cgroup before it is removed


@dataclass(frozen=True)
class MemoryCgroup:
    """The cgroup one sandboxed run lives in."""

    path: Path
    version: int  # 1 or 2

    @property
    def label(self) -> str:
        return f"cgroup v{self.version}"

    def enter(self) -> None:
        """Move the calling process into the cgroup (run between fork and exec: its children follow)."""
        with open(self.path / "cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))

    def peak(self) -> int | None:
        """The most memory the run held at once, in bytes (None where the kernel does not say)."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        """How many of the run's processes the kernel ended for passing the bound."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            fields = dict(
                line.split() for line in (self.path / name).read_text().splitlines() if len(line.split()) == 2
            )
        except OSError:
            return 0
        return int(fields.get("oom_kill", 0))

    def remove(self) -> None:
        """Remove the cgroup once its (killed) processes have left it; an emptied cgroup that cannot
        be removed yet is left behind, harmless, rather than holding up the harness."""
        deadline = time.monotonic() + REMOVE_WAIT
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)


def create(bound: int) -> MemoryCgroup | None:
    """A fresh memory cgroup limited to `bound` bytes (swap included), or None where none can be made."""
    found = _own_memory_cgroup()
    if found is None:
        return None
    version, parent = found
    path = parent / f"{PREFIX}{secrets.token_hex(6)}"
    try:
        path.mkdir()
    except OSError:
        return None
    cgroup = MemoryCgroup(path, version)
    try:
        if version == 1:
            (path / "memory.limit_in_bytes").write_text(str(bound))
            if (path / "memory.memsw.limit_in_bytes").exists():  # memory plus swap: no way round the bound
                (path / "memory.memsw.limit_in_bytes").write_text(str(bound))
        else:
            if "memory" not in (path / "cgroup.controllers").read_text().split():
                raise OSError("the memory controller is not delegated here")
            (path / "memory.max").write_text(str(bound))
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
    except OSError:
        cgroup.remove()
        return None
    return cgroup


def per_process_limit(bound: int, processes: int, tmpfs: int) -> int:
    """The address-space limit per process with no cgroup: `processes` of them at this limit, plus
    the tmpfs, stay within `bound`."""
    return (bound - tmpfs) // processes


@functools.cache
def _own_memory_cgroup() -> tuple[int, Path] | None:
    """(version, directory) of this process's cgroup in the hierarchy that holds the memory
    controller, from /proc/self/cgroup and /proc/self/mountinfo; None where there is none."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v1 = next((line.split(":", 2)[2] for line in memberships if "memory" in line.split(":", 2)[1].split(",")), None)
    if v1 is not None:
        found = _mounted(mounts, "cgroup", v1, lambda options: "memory" in options.split(","))
        return (1, found) if found else None
    v2 = next((line.split(":", 2)[2] for line in memberships if line.startswith("0::")), None)
    if v2 is not None:
        found = _mounted(mounts, "cgroup2", v2, lambda options: True)
        return (2, found) if found else None
    return None


def _mounted(mounts: list[str], fstype: str, cgroup: str, wanted) -> Path | None:
    """Where `cgroup` (a path inside its hierarchy) is reachable through a mount of that hierarchy."""
    for line in mounts:
        head, _, tail = line.partition(" - ")
        fields, tail_fields = head.split(), tail.split()
        if len(fields) < 5 or len(tail_fields) < 3 or tail_fields[0] != fstype or not wanted(tail_fields[2]):
            continue
        root, mount_point = fields[3], fields[4]
        inside = os.path.relpath(cgroup, root)
        if inside.startswith(".."):
            continue  # this mount shows another part of the hierarchy
        path = Path(mount_point) / inside
        if path.is_dir():
            return path.resolve()
    return None
