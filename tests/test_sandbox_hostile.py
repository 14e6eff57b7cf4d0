"""Hostile T3 solutions, one test each, as an attacker would write them: every one is contained (the
host shows no trace of it) or fails, and none passes the T3 criterion. A correct solution passes.

Each hostile solution pairs its attack with a WRONG implementation, so a pass could only come from
the attack; where an attack could yield the answers (reading the oracle), the solution uses them.
Attacks through native code first get past the child's audit hook (which is no boundary), so what
holds is bubblewrap's boundary, the unprivileged uid, the limits and the seccomp filter.
"""

import glob
import hashlib
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

import sabot.sandbox_memory
from sabot import sandbox, sandbox_view, tasks
from sabot.registry import DATA_DIR
from sabot.sandbox import run_calls, run_python

PROJECT = DATA_DIR.parent
FUNCTION = "kessler_freight_charge"
STUB = f"\n\ndef {FUNCTION}(weight_kg, zone, is_perishable):\n    return 0.0\n"
CORRECT = f"""from decimal import Decimal, ROUND_HALF_UP

RATES = {{"inland": Decimal("4.20"), "coastal": Decimal("5.75"), "highland": Decimal("9.10")}}


def {FUNCTION}(weight_kg, zone, is_perishable):
    if zone not in RATES or weight_kg <= 0:
        raise ValueError((weight_kg, zone))
    weight, rate = Decimal(str(weight_kg)), RATES[zone]
    charge = min(weight, 40) * rate + max(weight - 40, 0) * rate * Decimal("0.7")
    if is_perishable and zone != "highland":
        charge += charge * Decimal("0.15")
    subtotal = charge.quantize(Decimal("0.01"), ROUND_HALF_UP)
    return float(subtotal - 2 if subtotal >= 20 else subtotal)
"""
# Empties the audit hook's event sets (found through gc): ctypes loads, os.fork is no longer refused.
UNHOOK = (
    "import gc\nfor _o in gc.get_objects():\n"
    "    if isinstance(_o, set) and ('os.fork' in _o or 'os.chmod' in _o):\n        _o.clear()\n"
)
LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def _passes(code: str) -> bool:
    passed, why = tasks.t3_verdict(code)
    assert passed or why, "a failed verdict must say why"
    return passed


def _observe(code: str, **kwargs) -> str:
    """Run the solution once in the sandbox and return what its function reported about the attack."""
    result = run_calls({"solution.py": code}, "solution", FUNCTION, [[10, "inland", False]], **kwargs)
    assert result.outcomes is not None, result.reason
    return str(next(iter(result.outcomes[0].values())))


def _host_target() -> Path:
    """A host path the attacks try to create: beside the registry, where harm would be real."""
    return DATA_DIR / f"sabot-escape-{uuid.uuid4().hex}"


def _fingerprint() -> dict[str, str]:
    return {
        p: hashlib.sha256(Path(p).read_bytes()).hexdigest()
        for p in sorted(glob.glob(str(DATA_DIR / "**/*.json"), recursive=True))
    }


def _cffi_files() -> dict[str, bytes]:
    """The cffi package and its native backend from the harness venv, shipped INTO the sandbox: the
    attacker brings native code of its own (a T3 solution is one file, so this is the stronger case)."""
    site = Path(__import__("cffi").__file__).parents[1]
    files = {
        str(p.relative_to(site)): p.read_bytes() for pkg in ("cffi", "pycparser") for p in (site / pkg).rglob("*.py")
    }
    backend = next(site.glob("_cffi_backend*.so"))
    files[backend.name] = backend.read_bytes()
    return files


CFFI = (
    "from cffi import FFI\nffi = FFI()\n"
    "ffi.cdef('int system(const char *); int fork(void); int open(const char *, int, int); int *__errno_location(void);')\n"
    "c = ffi.dlopen(None)\nprint('cffi loaded', flush=True)\n"
)


def _run_with_cffi(code: str, **kwargs):
    files = {**_cffi_files(), "main.py": UNHOOK + CFFI + code}
    result = run_python(files, "main.py", **kwargs)
    assert "cffi loaded" in result.stdout, f"cffi did not load inside the sandbox: {result.stderr[-400:]}"
    return result


# -- the control ---------------------------------------------------------------------------------


def test_a_correct_solution_passes():
    assert tasks.t3_verdict(CORRECT) == (True, "")


def test_a_wrong_solution_fails_and_says_where():
    passed, why = tasks.t3_verdict(CORRECT.replace('"0.15"', '"0.10"'))
    assert not passed and why.startswith(f"{FUNCTION}(60, 'coastal', True): returned")


# -- native code: cffi system(), writes and forks; dir_fd writes ---------------------------------


def test_cffi_is_not_importable_by_a_solution():
    code = "import cffi\n" + STUB
    assert not _passes(code)
    assert (
        "ModuleNotFoundError: No module named 'cffi'"
        in run_calls({"solution.py": code}, "solution", FUNCTION, [[1, "inland", False]]).reason
    )


def test_cffi_system_finds_no_shell_and_touches_nothing():
    target = _host_target()
    result = _run_with_cffi(f"print('system', c.system(b'echo escaped > {target}; echo escaped'))\n")
    assert "system 32512" in result.stdout  # exit status 127: there is no /bin/sh in the view
    assert "escaped" not in result.stdout.replace("cffi loaded", "")
    assert not target.exists()


def test_cffi_writes_hit_a_read_only_view():
    before, target = _fingerprint(), _host_target()
    stdlib_target = Path(os.path.dirname(os.__file__)) / f"sabot_escape_{uuid.uuid4().hex}.py"
    writes = "".join(
        f"print('open', c.open(b'{p}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), c.__errno_location()[0])\n"
        for p in (target, stdlib_target, DATA_DIR / "registry.lock.json", sandbox_view.read_only_view()[0])
    )
    result = _run_with_cffi("import os, errno\n" + writes)
    assert result.stdout.count("open -1") == 4, result.stdout
    assert not target.exists() and not stdlib_target.exists()
    assert _fingerprint() == before


def test_cffi_forks_stop_at_the_process_limit():
    code = (
        "import time\nmade = 0\nfor _ in range(50):\n    pid = c.fork()\n    if pid == 0:\n        time.sleep(30)\n"
        "    if pid < 0:\n        break\n    made += 1\nprint('forked', made, flush=True)\n"
    )
    entry = f"bomb_{uuid.uuid4().hex}.py"
    files = {**_cffi_files(), entry: UNHOOK + CFFI + code}
    result = run_python(files, entry, timeout=10)
    made = int(result.stdout.split("forked ")[1].split()[0])
    assert made < sandbox.PROCESS_LIMIT  # the interpreter itself counts too
    assert not _processes_mentioning(entry)


def test_dir_fd_writes_hit_a_read_only_view():
    stdlib = os.path.dirname(os.__file__)
    name = f"sabot_escape_{uuid.uuid4().hex}.py"
    code = (
        f"import os\ndef {FUNCTION}(weight_kg, zone, is_perishable):\n    out = []\n"
        f"    for d in ('/', {stdlib!r}, '/tmp/..'):\n        fd = os.open(d, os.O_RDONLY)\n"
        f"        try:\n            os.close(os.open({name!r}, os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n            out.append('written')\n"
        "        except OSError as exc:\n            out.append(type(exc).__name__)\n    return out\n"
    )
    assert "written" not in _observe(code)
    assert not (Path(stdlib) / name).exists() and not Path("/", name).exists()
    assert not _passes(code)


# -- reading what must stay hidden ---------------------------------------------------------------


def test_reading_the_oracle_finds_nothing():
    oracles = [str(p) for p in (DATA_DIR / "tasks" / "T3").glob("oracle*.json")]
    # If any oracle were readable, this solution would answer every case from it and pass.
    code = f"""import json
ANSWERS = None
for path in {oracles!r}:
    try:
        ANSWERS = {{tuple(c["args"]): c for c in json.load(open(path))["answer"]["cases"]}}
    except OSError as exc:
        SEEN = type(exc).__name__


def {FUNCTION}(weight_kg, zone, is_perishable):
    if ANSWERS is None:
        return SEEN
    case = ANSWERS[(weight_kg, zone, is_perishable)]
    if "raises" in case:
        raise ValueError(case["raises"])
    return case["returns"]
"""
    assert _observe(code) == "FileNotFoundError"
    assert not _passes(code)


def test_reading_etc_passwd_and_the_project_finds_nothing():
    code = (
        f"import os\ndef {FUNCTION}(weight_kg, zone, is_perishable):\n    out = []\n"
        f"    for p in ('/etc/passwd', '/etc/shadow', {str(PROJECT / 'README.md')!r}, {str(DATA_DIR / 'registry.lock.json')!r}):\n"
        "        try:\n            out.append(open(p).read()[:20])\n"
        "        except OSError as exc:\n            out.append(type(exc).__name__)\n"
        f"    for d in ({str(PROJECT)!r}, {sys.prefix!r}, '/root/.cache', '/home', '/var'):\n"
        "        out.append(os.path.exists(d))\n    return out\n"
    )
    assert _observe(code) == str(["FileNotFoundError"] * 4 + [False] * 5)
    assert not _passes(code)


def test_no_readable_file_holds_the_tests_the_expected_values_or_a_nonce():
    """Walk everything the solution can see: the only readable files are the interpreter, its
    libraries, the standard library and the solution itself; none holds an expected value."""
    expected = sorted(
        {repr(c["returns"]) for c in tasks.oracle("T3").answer["cases"] if "returns" in c} - {"40.0", "18.0", "8.4"}
    )
    stdlib = os.path.dirname(os.__file__)
    code = f"""import os
def {FUNCTION}(weight_kg, zone, is_perishable):
    readable, hits = [], []
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/dev", "/sys")]
        for name in files:
            path = os.path.join(root, name)
            try:
                data = open(path, "rb").read()
            except OSError:
                continue
            if not path.startswith({stdlib!r}):
                readable.append(path)
            if any(v.encode() in data for v in {expected!r}) and path != "/tmp/solution.py" and not path.startswith({stdlib!r}):
                hits.append(path)
    return [hits, sorted(readable)]
"""
    result = run_calls({"solution.py": code}, "solution", FUNCTION, [[10, "inland", False]], timeout=60)
    assert result.outcomes is not None, result.reason
    hits, readable = result.outcomes[0]["returned"]
    assert hits == []
    view = sandbox_view.read_only_view()[1]
    bound = {view[i + 2] for i, arg in enumerate(view) if arg == "--ro-bind" and os.path.isfile(view[i + 2])}
    others = [p for p in readable if p != "/tmp/solution.py"]
    resolved = {os.path.realpath(p) for p in others}  # the view mirrors the host's symlinks
    assert others and resolved <= bound, resolved - bound  # the interpreter and its libraries only
    assert not [p for p in readable if p.startswith(("/sabot", str(PROJECT)))]  # the child's inputs are root's


# -- forging the verdict --------------------------------------------------------------------------


def test_replacing_builtins_does_not_pass():
    code = (
        "import builtins\nbuiltins.abs = lambda x: 0.0\nbuiltins.isinstance = lambda *a: True\n"
        "builtins.float = lambda *a: 40.0\n" + STUB
    )
    assert not _passes(code)


def test_monkeypatching_the_harness_does_not_pass():
    """Whatever the solution patches or writes in its own process, the comparison is elsewhere."""
    code = (
        """import json, os, sys, atexit
FORGED = json.dumps([{"returned": 0.0}] * 10) + "\\n"
json.dumps = lambda *a, **k: "0.0"
json.loads = lambda *a, **k: []
for fd in range(1, 20):
    try:
        os.write(fd, FORGED.encode())
    except OSError:
        pass
main = sys.modules["__main__"]
for name in dir(main):
    if callable(getattr(main, name, None)) and not name.startswith("__"):
        setattr(main, name, lambda *a, **k: None)
atexit.register(lambda: os.write(1, FORGED.encode()))
"""
        + STUB
    )
    assert not _passes(code)


def test_exiting_zero_on_import_does_not_pass():
    code = "import os\nprint('hidden tests passed', flush=True)\nos._exit(0)\n" + STUB
    assert not _passes(code)
    assert tasks.t3_verdict(code)[1] == "the run wrote no well-formed report (JSONDecodeError)"


def test_exiting_zero_from_inside_a_call_does_not_pass():
    code = f"import os\ndef {FUNCTION}(weight_kg, zone, is_perishable):\n    os._exit(0)\n"
    assert not _passes(code)


# -- exhausting resources -------------------------------------------------------------------------


def test_a_loop_times_out():
    code = "while True:\n    pass\n" + STUB
    passed, why = tasks.t3_verdict(code)
    assert not passed and why.startswith("timed out after")


def test_a_bounded_fork_bomb_is_capped_and_leaves_nothing():
    entry = f"bomb_{uuid.uuid4().hex}.py"
    code = (
        UNHOOK
        + "import os, time\nmade = 0\nfor _ in range(6):\n    try:\n        if os.fork() == 0:\n            made = 0\n"
        "    except OSError:\n        break\n    made += 1\nprint('forked', flush=True)\ntime.sleep(30)\n"
    )
    result = run_python({entry: code}, entry, timeout=3)
    assert result.timed_out
    assert result.stdout.count("forked") <= sandbox.PROCESS_LIMIT  # 2**6 = 64 without the cap
    assert not _processes_mentioning(entry)
    assert not _passes(
        UNHOOK
        + "import os\nfor _ in range(6):\n    try:\n        os.fork()\n    except OSError:\n        break\n"
        + STUB
    )


def test_a_gigabyte_of_output_fails():
    code = "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * 2**20)\n" + STUB
    passed, why = tasks.t3_verdict(code)
    assert not passed and ("killed by signal" in why or "output truncated" in why or "File too large" in why), why


def test_an_8_gb_allocation_fails():
    code = "hog = bytearray(8 * 1024**3)\n" + STUB
    passed, why = tasks.t3_verdict(code)
    assert not passed and ("MemoryError" in why or "killed by signal" in why), why


def test_a_socket_to_a_loopback_port_never_connects():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        code = (
            UNHOOK + LIBC + "import errno\n"
            f"def {FUNCTION}(weight_kg, zone, is_perishable):\n    out = []\n"
            f"    try:\n        __import__('socket').create_connection(('127.0.0.1', {port}), timeout=2)\n        out.append('connected')\n"
            "    except OSError as exc:\n        out.append(type(exc).__name__)\n"
            "    fd = libc.socket(2, 1, 0)\n    out.append(errno.errorcode[ctypes.get_errno()] if fd < 0 else 'socket made')\n"
            "    return out\n"
        )
        assert _observe(code) == "['PermissionError', 'EAFNOSUPPORT']"
        assert not _passes(code)
        listener.settimeout(0.5)
        with pytest.raises(TimeoutError):
            listener.accept()


def _processes_mentioning(token: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


# -- reports the harness cannot read --------------------------------------------------------------

# Writes 60,000 '[' on every descriptor the solution holds (the report descriptor among them), then
# leaves with status 0 before the child can write a report: json.loads of it nests past the parser.
BRACKETS = (
    "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'[' * 60000)\n    except OSError:\n"
    "        pass\nos._exit(0)\n" + STUB
)


def test_a_report_of_60000_brackets_is_a_failure_with_its_reason():
    passed, why = tasks.t3_verdict(BRACKETS)
    assert not passed and why == "the run wrote no well-formed report (RecursionError)"


def test_the_pass_criterion_fails_an_unreadable_report_rather_than_raising(tmp_path):
    """What a run step calls once the pipeline has written its artifact (adapters.runner): it
    returns a verdict, so the step completes and stores the run as failed."""
    (tmp_path / tasks.served("T3").artifact_file).write_text(BRACKETS)
    assert tasks.passes("T3", tmp_path) is False


@pytest.mark.parametrize("artifact", ["[" * 60000, '{"a": ' * 60000])
def test_json_criteria_fail_an_artifact_nested_past_the_parser(tmp_path, artifact):
    for task in ("T1", "T4"):
        (tmp_path / tasks.served(task).artifact_file).write_text(artifact)
        assert tasks.passes(task, tmp_path) is False


# -- one memory bound for the whole sandbox -------------------------------------------------------

# Eight processes (past the audit hook) each fill 400 MB: 3.2 GB together if nothing bounded the sum.
EIGHT_HOGS = (
    UNHOOK + "import os, resource, time\nprint('limit', resource.getrlimit(resource.RLIMIT_AS)[0], flush=True)\n"
    "for _ in range(8):\n    if os.fork() == 0:\n        try:\n            hog = b'x' * (400 * 2**20)\n"
    "            print('filled', flush=True)\n            time.sleep(5)\n        except MemoryError:\n"
    "            print('refused', flush=True)\n        os._exit(0)\n"
    "for _ in range(8):\n    os.wait()\n"
)
BOUND_MB = 512


@pytest.mark.skipif(
    sabot.sandbox_memory._own_memory_cgroup() is None, reason="this kernel offers no memory cgroup to the harness"
)
def test_eight_processes_of_400_mb_stay_under_the_sandbox_memory_bound():
    entry = f"hogs_{uuid.uuid4().hex}.py"
    result = run_python({entry: EIGHT_HOGS}, entry, timeout=20, memory_mb=BOUND_MB)
    assert result.memory_bounded_by.startswith("cgroup v") and result.memory_bound == BOUND_MB * 2**20
    assert result.memory_peak is not None and result.memory_peak <= result.memory_bound  # the kernel's count of the run
    assert not result.ok and f"memory bound of {BOUND_MB} MB reached" in result.reason
    assert result.stdout.count("filled") < 8
    assert not _processes_mentioning(entry)
    parent = sabot.sandbox_memory._own_memory_cgroup()[1]
    assert not list(parent.glob(f"{sabot.sandbox_memory.PREFIX}*")), "the run's cgroup was left behind"


def test_without_a_cgroup_the_per_process_limits_multiply_to_under_the_bound(monkeypatch):
    monkeypatch.setattr(sabot.sandbox_memory, "create", lambda bound: None)
    entry = f"hogs_{uuid.uuid4().hex}.py"
    result = run_python({entry: EIGHT_HOGS}, entry, timeout=20, memory_mb=BOUND_MB)
    limit = int(result.stdout.split("limit ")[1].split()[0])  # as the kernel applies it inside
    processes = sandbox.PROCESS_LIMIT + sandbox.BWRAP_PROCESSES
    assert result.memory_bounded_by == "per-process limits"
    assert limit * processes + sandbox.TMPFS_SIZE <= BOUND_MB * 2**20
    assert "filled" not in result.stdout and result.stdout.count("refused") == 8
    assert not _processes_mentioning(entry)
