"""One run's child of the confined server, kept from its siblings (other runs in flight).

The sandbox keeps every run from the harness; inside it, runs in flight share the server's scratch
area and its PID namespace. So each child, first thing after its fork (single-threaded, as
unshare(2) requires), enters a user and mount namespace of its own where the scratch area is
covered by an empty directory the harness made for this run (`cover`, read-only in the sandbox,
holding one empty directory of the run's name) and its own scratch directory is bound back at the
same path (the harness reads it there). It then drops every capability for good, so those mounts
cannot be undone, and as no uid is mapped in its namespace it cannot make another one to regain
any (user_namespaces(7)). Last, it marks itself not dumpable: a sibling, with no
capability in the sandbox's user namespace, then reads none of its /proc entries (environ, memory,
open files, cwd, root).
"""

import ctypes
import os
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 38, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
LAST_CAPABILITY = 63  # past any the kernel knows: an unknown one is refused (EINVAL) and skipped


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(libc, result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(libc, source: str | None, target: str, flags: int, what: str) -> None:
    _check(
        libc,
        libc.mount(None if source is None else source.encode(), target.encode(), None, ctypes.c_ulong(flags), None),
        what,
    )


def _drop_capabilities(libc) -> None:
    """Every capability gone, for good (bounding set, ambient, effective, permitted; no new privileges):
    what this namespace mounted can no longer be unmounted, and no uid mapped here can make a new one."""
    for capability in range(LAST_CAPABILITY + 1):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            _check(libc, -1, f"prctl(PR_CAPBSET_DROP, {capability})")
    _check(libc, libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    _check(libc, libc.capset(ctypes.byref(_CapHeader(LINUX_CAPABILITY_VERSION_3, 0)), (_CapData * 2)()), "capset")
    _check(libc, libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def isolate_run(scratch_area: Path, run_dir: Path, cover: Path) -> None:
    """From now on see only `run_dir` of `scratch_area`, and be unreadable to siblings."""
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc, libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount)")
    _mount(libc, None, "/", MS_REC | MS_PRIVATE, "making the mounts private")
    _mount(libc, str(run_dir), str(cover / run_dir.name), MS_BIND, "binding the run's scratch directory into its cover")
    _mount(libc, str(cover), str(scratch_area), MS_BIND | MS_REC, "covering the scratch area")
    _drop_capabilities(libc)
    os.chdir(run_dir)
    _check(libc, libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
