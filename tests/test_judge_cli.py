"""The CLI judge and its sandbox probe: a judge that could read or leak what it judges is refused,
for the whole batch, and a hung or unparseable one excludes its cell.

No test runs a real `claude`: the judge runs `tests/fake_claude/claude` from a temp dir put first
on PATH.
"""

import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest

from judges.soft import BatchRefused, SandboxViolation, judge_batch, judge_cell
from judges.soft.backends.claude_cli import (
    DISALLOWED_TOOLS,
    PERMISSIVE_FLAGS,
    RESTRICTED_FLAGS,
    ClaudeCliJudge,
    token_leaked,
)
from judges.soft.verdict import STATUS_EXCLUDED
from tests.test_judges import FLAGS_LINE, T1_O1, noticing_record, silent_record

FAKE_CLAUDE = Path(__file__).resolve().parent / "fake_claude" / "claude"


class FakeClaude:
    def __init__(self, bin_dir: Path, log: Path, monkeypatch):
        self.bin_dir, self.log, self.monkeypatch = bin_dir, log, monkeypatch

    def mode(self, mode: str, leak: str = "both") -> None:
        self.monkeypatch.setenv("CLAUDE_FAKE_MODE", mode)
        self.monkeypatch.setenv("CLAUDE_FAKE_LEAK", leak)

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def fake_claude(tmp_path, monkeypatch) -> FakeClaude:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "claude"
    shutil.copyfile(FAKE_CLAUDE, exe)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (bin_dir / "python3").symlink_to(sys.executable)  # `#!/usr/bin/env python3` finds this interpreter
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shutil.which("claude") == str(exe)  # the fake, never a real claude
    for name in [k for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))]:
        monkeypatch.delenv(name)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("CLAUDE_FAKE_LOG", str(log))
    fake = FakeClaude(bin_dir, log, monkeypatch)
    fake.mode("honest")  # a CLI that honours its flags: reads a file only where a tool is allowed
    return fake


@pytest.mark.parametrize(
    "leak, arm",
    [
        ("cwd", "working directory"),
        ("outside", "outside path"),
        ("both", "working directory and outside path"),
    ],
)
def test_probe_raises_for_a_leaky_judge_naming_the_arm(fake_claude, leak, arm):
    fake_claude.mode("leaky", leak)
    with pytest.raises(SandboxViolation) as err:
        ClaudeCliJudge().assert_sandboxed()
    assert err.value.arm == arm


def test_probe_passes_for_a_sealed_judge_under_the_restricted_flags(fake_claude, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-never-logged-0123456789")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/root/.claude")
    monkeypatch.setenv("UNRELATED_SECRET", "must-not-pass")
    read_end, write_end = os.pipe()  # fd 0 is a pipe during the call: an inherited stdin would show
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        ClaudeCliJudge(model="claude-test").assert_sandboxed()
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    probe, positive = fake_claude.calls()  # the positive control runs by default, after the restricted arms
    assert positive["argv"][2:] == [*PERMISSIVE_FLAGS, "--model", "claude-test"]
    prompt = probe["argv"][1]
    assert probe["argv"] == ["-p", prompt, *RESTRICTED_FLAGS, "--model", "claude-test"]
    assert probe["argv"][probe["argv"].index("--allowed-tools") + 1] == ""
    assert (
        probe["tools"] == [] and "--strict-mcp-config" in probe["argv"]
    )  # no built-in tool of the pinned CLI in reach
    assert probe["cwd_entries"] == ["canary.txt"] and probe["stdin_devnull"]
    outside = Path(prompt.split("(2) the file ")[1].split(". If")[0])
    assert outside.parent.parent == Path(probe["cwd"]).parent and not outside.is_relative_to(probe["cwd"])
    passed = set(probe["env"]) - {"LC_CTYPE"}  # set by the fake's own Python at startup (PEP 538 locale coercion)
    assert passed == {"PATH", "HOME", "ANTHROPIC_API_KEY", "CLAUDE_FAKE_MODE", "CLAUDE_FAKE_LEAK", "CLAUDE_FAKE_LOG"}
    assert probe["home"] not in (os.environ.get("HOME"), probe["cwd"]) and not Path(probe["cwd"]).exists()


def test_token_leak_check_catches_slices_and_case():
    token = "0123456789abcdef0123456789abcdef"
    assert token_leaked(token, "contents: 89ABCDEF01234567 ...")
    assert token_leaked(token, "0123 4567 89ab cdef")  # whitespace inserted
    assert not token_leaked(token, "contents: 89abcdef0123456 (15 chars)")


def test_judge_batch_refuses_the_whole_batch_for_a_leaky_judge(fake_claude):
    fake_claude.mode("leaky")
    judge = ClaudeCliJudge()
    with pytest.raises(BatchRefused) as err:
        judge_batch(judge, [(noticing_record(), T1_O1), (silent_record(), T1_O1, 1)])
    assert isinstance(err.value.cause, SandboxViolation)
    assert len(fake_claude.calls()) == 1  # the probe only: no cell reached the judge, no verdict exists


def test_judge_batch_judges_every_cell_behind_a_passing_probe(fake_claude):
    verdicts = judge_batch(ClaudeCliJudge(), [(noticing_record(), T1_O1), (silent_record(), T1_O1, 1)])
    probe, positive, *judging = fake_claude.calls()
    assert probe["cwd_entries"] == positive["cwd_entries"] == ["canary.txt"]
    assert [c["cwd_entries"] for c in judging] == [[], []]  # a fresh EMPTY cwd per judging call
    assert len({c["cwd"] for c in fake_claude.calls()}) == 4 and all(
        c["argv"][2:] == list(RESTRICTED_FLAGS) for c in judging
    )
    assert all(c["tools"] == [] for c in judging)
    assert [(v.status, v.noticed, v.by_which_component, v.prompt_variant) for v in verdicts] == [
        ("ok", True, "reviewer", 0),
        ("ok", True, "reviewer", 1),
    ]
    assert verdicts[0].evidence_quote == FLAGS_LINE  # the fake quotes the first line of the last event
    assert verdicts[0].backend == "claude-cli" and verdicts[0].backend_version.startswith("9.9.9-fake")


def test_probe_fails_for_a_missing_or_failing_executable(fake_claude, monkeypatch):
    with pytest.raises(SandboxViolation) as missing:
        ClaudeCliJudge(executable="claude-not-installed-anywhere").assert_sandboxed()
    assert missing.value.arm == "executable" and "not found" in str(missing.value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-never-logged-0123456789")
    fake_claude.mode("broken")
    with pytest.raises(SandboxViolation) as broken:
        ClaudeCliJudge().assert_sandboxed()
    assert broken.value.arm == "executable" and "exit status 3" in str(broken.value)
    assert "sk-test-never-logged" not in str(broken.value) and "***" in str(broken.value)
    with pytest.raises(BatchRefused):
        judge_batch(ClaudeCliJudge(), [(noticing_record(), T1_O1)])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a killed orphan may linger as a zombie until init reaps it


def test_a_hung_judge_is_killed_with_its_children_and_the_cell_excluded(fake_claude):
    fake_claude.mode("hang")
    started = time.monotonic()
    verdict = judge_cell(ClaudeCliJudge(timeout=0.4), noticing_record(), T1_O1)
    assert (
        time.monotonic() - started < 50
    )  # bounded: two 60 s sleepers did not hold the call (loaded CI machines are slow)
    assert verdict.status == STATUS_EXCLUDED and verdict.reason.count("no reply within 0.4s") == 2
    calls = fake_claude.calls()
    assert len(calls) == 2
    for call in calls:
        assert not alive(call["pid"]) and not alive(call["child_pid"])


def test_unparseable_cli_replies_are_excluded(fake_claude):
    fake_claude.mode("garbage")
    verdict = judge_cell(ClaudeCliJudge(), noticing_record(), T1_O1)
    assert (verdict.status, verdict.attempts, len(fake_claude.calls())) == (STATUS_EXCLUDED, 2, 2)


def test_positive_control_arm_makes_the_probe_falsifiable_by_default(fake_claude):
    fake_claude.mode("honest")  # reads its cwd canary only when a tool is allowed
    ClaudeCliJudge().assert_sandboxed()
    assert [c["argv"][c["argv"].index("--allowed-tools") + 1] for c in fake_claude.calls()] == ["", "Read"]
    fake_claude.mode("sealed")  # cannot read even when allowed: its silence proves nothing
    with pytest.raises(SandboxViolation) as err:
        ClaudeCliJudge().assert_sandboxed()
    assert err.value.arm == "positive control"
    with pytest.raises(BatchRefused):  # and no cell is judged behind a probe that could not have failed
        judge_batch(ClaudeCliJudge(), [(noticing_record(), T1_O1)])


def test_the_deny_list_names_every_built_in_tool_of_the_pinned_cli(fake_claude):
    # The fake carries the pinned CLI's tool inventory (its tools reference), apart from the judge's
    # list: a tool the CLI gains (as Monitor once was) fails this until the deny list names it.
    judge_cell(ClaudeCliJudge(), noticing_record(), T1_O1)
    [call] = fake_claude.calls()
    assert call["tools"] == []
    assert {"Read", "Glob", "Grep", "LS", "NotebookRead", "Agent", "Task", "Monitor"} <= set(DISALLOWED_TOOLS)
