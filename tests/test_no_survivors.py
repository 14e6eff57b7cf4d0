"""No survivors: kill -9 of a wave command's pid alone, and 10 s later no process it started is alive
(its fork server, the runs forked from it, its confined server's sandbox, the resource tracker,
Dagster's log tailers), whether the kill lands while the fork server is still importing the frameworks,
while runs are in flight, or while a pool worker forked just before waits for its run (it holds the
resource tracker open)."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
ARGS = ["wave", "run", "demo", "--framework", "langgraph", "--task", "T1", "--seed", "11", "--concurrency", "2"]


def _session(sid: int) -> list[tuple[int, str]]:
    """The live processes of a session: everything the command started (none of them calls setsid)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat[stat.rindex(")") + 2 :].split()[:4]
        if int(session) == sid and state not in ("Z", "X"):
            found.append((int(proc.name), command))
    return found


def _sandboxes(var: Path) -> list[tuple[int, str]]:
    """The bubblewrap processes masking this command's SABOT_VAR: its confined server's sandbox, which
    runs in a session of its own. With them gone its PID namespace is gone, and every process in it."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv and argv[0].endswith(b"bwrap") and str(var).encode() in argv and state not in ("Z", "X"):
            found.append((int(proc.name), " ".join(a.decode(errors="replace") for a in argv)[:160]))
    return found


def _forked_runs(var: Path) -> bool:
    return any(var.glob("runroot/demo/*/*/*/*/*/attempt-*"))


def _idle_worker(sid: int) -> bool:
    """A pool worker forked from the fork server that waits for its run: one thread, blocked reading the task pipe."""
    servers = {pid for pid, command in _session(sid) if "multiprocessing.forkserver" in command}
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if (
                parent in servers
                and len(list((proc / "task").iterdir())) == 1
                and (proc / "wchan").read_text() in ("pipe_read", "anon_pipe_read")
            ):
                return True
        except (OSError, ValueError):
            continue
    return False


@pytest.mark.parametrize("moment", ["fork server importing", "runs in flight", "a worker waiting for its run"])
def test_kill_9_of_the_pid_leaves_no_process_it_started(tmp_path, moment):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "DAGSTER_HOME", "SABOT_DAGSTER_STORAGE", "SABOT_MODEL_BASE_URL")
    }
    env["SABOT_VAR"] = str(tmp_path / "var")
    command = subprocess.Popen(
        [str(PROJECT / ".venv/bin/sabot"), *ARGS],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    reached = {
        "fork server importing": lambda: any("multiprocessing.forkserver" in c for _, c in _session(command.pid)),
        "runs in flight": lambda: _forked_runs(tmp_path / "var"),
        "a worker waiting for its run": lambda: _idle_worker(command.pid),
    }[moment]
    deadline = time.monotonic() + 300
    while not reached():
        assert command.poll() is None and time.monotonic() < deadline, f"the command ended before {moment}"
        time.sleep(0.02)
    started = _session(command.pid)
    assert len(started) > 1  # the command and what it started
    if moment == "runs in flight":
        assert _sandboxes(tmp_path / "var"), (
            "the confined server's sandbox was not found: this test would see nothing of it"
        )
    os.kill(command.pid, signal.SIGKILL)  # the pid alone, not its group
    command.wait()
    time.sleep(10)
    assert _session(command.pid) == []
    assert _sandboxes(tmp_path / "var") == []


FAKE_COMMAND = (
    "import os, subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-m', 'sabot.leftover_reaper', str(os.getpid())])\n"
    "helper = subprocess.Popen(['sleep', '600'])  # a library's helper nobody else watches (Dagster's tail, killed in its window)\n"
    "print(os.getpid(), helper.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def test_the_leftover_watcher_ends_the_commands_orphans_and_nothing_else():
    """The backstop every wave command starts: once the command dies, its orphaned helpers are killed; a
    process of the same job whose parent lives (a pipeline partner, started by the shell) is left alone."""
    shell = subprocess.Popen(
        ["bash", "-c", f'{PROJECT / ".venv/bin/python"} -c "$FAKE" & sleep 600 & wait'],
        cwd=PROJECT,
        env={**os.environ, "FAKE": FAKE_COMMAND},
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        command, helper = map(int, shell.stdout.readline().split())
        time.sleep(1)  # the watcher is running
        [partner] = [pid for pid, cmd in _session(shell.pid) if cmd.startswith("sleep") and pid != helper]
        os.kill(command, signal.SIGKILL)
        time.sleep(5)
        alive = {pid for pid, _ in _session(shell.pid)}
        assert helper not in alive  # the command's orphan
        assert partner in alive and shell.pid in alive  # the job's other members, their parent alive
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
