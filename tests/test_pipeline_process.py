"""A team's pipeline in its own process, on the built-in run path: what that process holds and how it ends.

With a provider key the pipeline runs in a fresh interpreter whose memory never holds the key; a pipeline
that hangs is stopped at the registered wall limit, naming where in the project it hung, with everything
it started; the confined process's results and errors come back as data, without the harness's settings.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from sabot.projects import Project
from tests.project_provider import KEY, QUICK_POLICY, Provider

ROOT = Path(__file__).resolve().parents[1]

MEMORY_PROBE = (
    "\n\n# Added by the test: whether a string is anywhere in this process's readable memory (/proc/self/mem),\n"
    "# known to the probe by a prefix and a digest only, so the probe itself does not put it there.\n"
    "import hashlib as _hashlib, json as _json\n\n\n"
    "def _in_memory(prefix, digest, length, block=1 << 24):\n"
    "    scanned = 0\n"
    "    with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:\n"
    "        for line in maps.read().splitlines():\n"
    "            span, perms = line.split()[:2]\n"
    "            start, end = (int(x, 16) for x in span.split('-'))\n"
    "            for at in range(start, end, block) if perms.startswith('r') else ():\n"
    "                try:\n"
    "                    mem.seek(at)\n"
    "                    chunk = mem.read(min(block + length, end - at))\n"
    "                except (OSError, OverflowError, ValueError):  # [vvar], [vsyscall]\n"
    "                    break\n"
    "                scanned += len(chunk)\n"
    "                hit = chunk.find(prefix)\n"
    "                while hit >= 0:\n"
    "                    if _hashlib.sha256(chunk[hit:hit + length]).hexdigest() == digest:\n"
    "                        return True, scanned\n"
    "                    hit = chunk.find(prefix, hit + 1)\n"
    "    return False, scanned\n\n\n"
    "with open('key-in-memory.json', 'w') as _out:\n"
    "    _json.dump({name: _in_memory(*probe) for name, probe in %r.items()}, _out)\n"
)


def _probe(secret: str) -> tuple[bytes, str, int]:
    return secret[:6].encode(), hashlib.sha256(secret.encode()).hexdigest(), len(secret)


def test_the_pipeline_process_never_held_the_provider_key_in_its_memory(tmp_path, monkeypatch):
    """With a provider key the pipeline runs in a fresh interpreter, not a fork of the process holding
    the key: a scan of all its readable memory finds the placeholder key it was given, never the provider's."""
    from adapters.byo.confined_work import PROXY_KEY
    from adapters.byo.runner import execute

    copy = tmp_path / "scanned_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", copy, ignore=shutil.ignore_patterns("__pycache__"))
    probes = {"provider key": _probe(KEY), "placeholder key": _probe(PROXY_KEY)}
    (copy / "refund_desk.py").write_text((copy / "refund_desk.py").read_text() + MEMORY_PROBE % probes)
    project = Project.load(copy)
    provider = Provider(project)
    with provider.server:
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", provider.server.base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", KEY)
        record = execute(project, None, 1, "scanned", tmp_path / "run")
    assert record.error is None and provider.server.exchanges  # the run went to the provider, with the key
    found = json.loads((tmp_path / "run" / "key-in-memory.json").read_text())
    assert (
        found["placeholder key"][0] and found["placeholder key"][1] > 10_000_000
    )  # the scan sees what the process holds
    assert found["provider key"][0] is False, found


HANG = (
    "\n\nimport subprocess as _subprocess, time as _time\n"
    "_build_graph = build_graph\n\n\n"
    "def build_graph():  # the test's hang: a helper process started, then no return\n"
    "    _subprocess.Popen(['sleep', '%s'])\n"
    "    _time.sleep(600)\n"
    "    return _build_graph()\n"
)


def _marked_sleep() -> str:
    """A sleep duration no other process on the host uses: how a helper started inside the sandbox's own
    PID namespace (where its pid means nothing here) is found from outside."""
    import uuid

    return f"600.{uuid.uuid4().int % 10**9:09d}"


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", marker.encode()]
                and not _gone(int(entry.name))
            ):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_a_pipeline_that_hangs_is_stopped_at_the_wall_limit_naming_its_file(tmp_path):
    """The wall limit is the call policy's registered run_wall_limit_seconds (here overridden to 20 s):
    the pipeline's whole sandbox is killed, and the error names where in the project it hung."""
    import time

    from adapters.byo.runner import run_project
    from adapters.gateway import CallPolicy
    from adapters.runner import RunSpec

    copy = tmp_path / "hung_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", copy, ignore=shutil.ignore_patterns("__pycache__"))
    marker = _marked_sleep()
    (copy / "refund_desk.py").write_text((copy / "refund_desk.py").read_text() + HANG % marker)
    # Long enough for the fresh interpreter to import the framework and reach the hang on a busy machine.
    policy = CallPolicy.from_doc({**QUICK_POLICY, "run_wall_limit_seconds": 20, "limits": {}}, "a 20 s wall limit")
    started = time.monotonic()
    outcome = run_project(
        RunSpec("refund_desk", 1, "langgraph", "own", "refund", None, 1),
        Project.load(copy),
        tmp_path / "runs",
        call_policy=policy,
    )
    took = time.monotonic() - started
    error = outcome.record.error
    assert (
        error
        and "ran past the run's wall limit of 20 s" in error
        and "refund_desk:build_graph (refund_desk.py)" in error
    ), error
    assert (
        "it was at refund_desk.py:" in error and "in build_graph" in error
    )  # where, from the hung process's own stack
    assert took < 60 and "attempt" not in error  # stopped once, not retried: it would hang again
    assert _running(marker) == []  # what the pipeline started ended with it


CONFINED = (
    "import os, subprocess, time\n\n\n"
    "def hang(marker):\n"
    "    subprocess.Popen(['sleep', marker])\n"
    "    time.sleep(600)\n\n\n"
    "def fail():\n"
    "    raise KeyError('no such refund')\n\n\n"
    "def vanish():\n"
    "    os._exit(3)\n\n\n"
    "def environment():\n"
    "    return dict(os.environ)\n"
)


@pytest.mark.parametrize("secrets", [(), (KEY,)], ids=["offline", "with a key"])
def test_the_pipeline_process_ends_and_answers_as_data(tmp_path, monkeypatch, secrets):
    """The pipeline's process, confined: the wall limit names the file and line and ends everything it
    started, the result and errors come back as data, the key and the harness's settings stay out."""
    import functools
    import importlib
    import sys

    from adapters.byo.confine import ChildDied, ChildFailed, WallLimitExceeded, run_confined

    (tmp_path / "confined_here.py").write_text(CONFINED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "confined_here", raising=False)
    monkeypatch.setenv("SABOT_MODEL_API_KEY", KEY)
    work = importlib.import_module("confined_here")
    marker = _marked_sleep()
    with pytest.raises(WallLimitExceeded) as hung:
        run_confined(functools.partial(work.hang, marker), 2, tmp_path, secrets)
    assert hung.value.where == "confined_here.py:6 in hang"
    assert _ends_all(marker)
    with pytest.raises(ChildFailed) as failed:
        run_confined(work.fail, 30, tmp_path, secrets)
    assert (failed.value.kind, failed.value.message) == (
        "KeyError",
        "'no such refund'",
    ) and "confined_here.py" in failed.value.trace
    with pytest.raises(ChildDied):
        run_confined(work.vanish, 30, tmp_path, secrets)
    environ = run_confined(work.environment, 30, tmp_path, secrets)
    assert environ["PATH"] == os.environ["PATH"] and not any(KEY in v for v in environ.values())
    assert not [k for k in environ if k.startswith(("SABOT_", "DAGSTER_"))]
    if secrets:  # what the fresh interpreter is handed is checked for the key before it starts
        with pytest.raises(ValueError, match="holds a secret"):
            run_confined(functools.partial(len, KEY), 30, tmp_path, secrets)


def _ends_all(marker: str, seconds: float = 5) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
