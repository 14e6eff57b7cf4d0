"""The seccomp filter bubblewrap loads into the T3 sandbox (`bwrap --seccomp FD`), compiled with libseccomp.

A deny list in the spirit of Flatpak's and Docker's default profiles: everything ordinary Python
needs stays allowed; what only serves to escape or attack the kernel is refused with an errno (the
code sees a clean OSError, the run simply fails). It sits behind the namespaces, the read-only
view and the dropped uid, so it narrows the kernel surface rather than being the boundary itself:

- no new namespaces (`unshare`, `setns`, namespace flags to `clone`; `clone3` reports ENOSYS so
  the C library falls back to `clone`, whose flags can be checked);
- no mounting, pivoting, chroot, module loading, kexec, reboot, swap, accounting, clock setting;
- no tracing or reading another process's memory, no keyrings, no BPF, no perf, no userfaultfd,
  no io_uring, no file handles by number, no terminal input injection (TIOCSTI);
- sockets of the AF_UNIX family only (asyncio needs a socketpair; the network namespace has no
  interface anyway).

Syscalls of another ABI (i386, x32) are killed by libseccomp's default bad-architecture action.
"""

import errno
import functools
import socket
import tempfile

DENIED = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "kcmp",
    "add_key",
    "request_key",
    "keyctl",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "quotactl",
    "syslog",
    "vhangup",
    "iopl",
    "ioperm",
    "personality",
    "fanotify_init",
    "mbind",
    "migrate_pages",
    "move_pages",
    "set_mempolicy",
    "nfsservctl",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
)
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
TIOCSTI = 0x5412


@functools.cache
def filter_bpf() -> bytes:
    """The compiled filter for this machine's architecture, built once per process."""
    import pyseccomp as sc  # lazily: only a sandboxed run needs libseccomp

    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (OSError, ValueError, RuntimeError):
            pass  # a syscall this kernel or architecture does not have cannot be used either
    for flag in NAMESPACE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    f.add_rule(sc.ERRNO(errno.EPERM), "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, TIOCSTI))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()
