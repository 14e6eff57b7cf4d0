"""The project gate: `wave run DIR` runs only a project that passes its check now, whatever lock
the folder holds; a folder or wave name that names nothing is refused at once, before any store.

The commands run as a team runs them (the `sabot` executable, each with its own SABOT_VAR), so
"no store created" is a fact about the file system, not about a mocked store.
"""

import json
import os
import re
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sabot_assets.cli import main

ROOT = Path(__file__).resolve().parents[1]
SABOT = ROOT / ".venv" / "bin" / "sabot"
ONCALL = ROOT / "examples" / "oncall_triage"


def sabot(args, cwd: Path, var: Path) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY", "SABOT_DAGSTER_STORAGE")
    }
    return subprocess.run(
        [str(SABOT), *args], cwd=cwd, env={**env, "SABOT_VAR": str(var)}, capture_output=True, text=True, timeout=600
    )


def registered_copy(tmp_path: Path, name: str = "oncall_triage") -> Path:
    copy = tmp_path / name
    shutil.copytree(ONCALL, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_lock_older_than_the_code_does_not_let_a_failing_check_through(tmp_path):
    """The team renames an agent in its code; the registered mapping still names the old one and the
    lock still matches the registered files: the run is refused with the check's own words."""
    copy = registered_copy(tmp_path)
    code = copy / "oncall_triage.py"
    text, renamed = re.subn(
        r'AssistantAgent\(\s*"critic"', 'AssistantAgent("reviewer"', code.read_text()
    )  # however it is laid out
    assert renamed == 1, f'expected one AssistantAgent("critic", ...) in {code}, found {renamed}'
    code.write_text(text)
    done = sabot(["wave", "run", str(copy), "--seed", "1"], tmp_path, tmp_path / "var")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "oncall_triage: refused before any run" in done.stderr
    assert "agent 'critic' is not in the built pipeline" in done.stderr
    assert not (tmp_path / "var" / "sabot.duckdb").exists()  # nothing ran, nothing stored


def test_an_edited_registered_file_is_named_with_what_registers_it_again(tmp_path):
    copy = registered_copy(tmp_path)
    mapping = copy / "sabot" / "mapping.json"
    doc = json.loads(mapping.read_text())
    doc["surfaces"] = doc["surfaces"][:2]
    mapping.write_text(json.dumps(doc, indent=1))
    done = CliRunner().invoke(main, ["wave", "run", str(copy)])
    assert done.exit_code == 1
    assert "oncall_triage/sabot/mapping.json: edited after registration" in done.output
    assert "copy the folder under a new name, then `sabot registry lock NEW_DIR`" in done.output


def test_an_unregistered_project_is_refused_with_the_commands_that_register_it(tmp_path):
    copy = registered_copy(tmp_path)
    (copy / "sabot" / "registry.lock.json").unlink()
    done = CliRunner().invoke(main, ["wave", "run", str(copy)])
    assert done.exit_code == 1
    assert f"{copy}: not registered: run `sabot project check {copy}`, then `sabot registry lock {copy}`" in done.output


def _one_line_refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_misspelt_folder_is_refused_in_one_line_with_the_near_folder_and_no_store(tmp_path):
    registered_copy(tmp_path, "access_swarm")
    (tmp_path / "notes").mkdir()
    line = _one_line_refusal(sabot(["wave", "run", "./acces_swarm"], tmp_path, tmp_path / "var"))
    assert line.startswith("Error: ./acces_swarm: no such folder; did you mean ./access_swarm?")
    assert "nothing is there" in line  # the `sabot init` it mentions is for a new project, said so
    assert not (tmp_path / "var").exists()
    line = _one_line_refusal(sabot(["registry", "lock", "./acces_swarm"], tmp_path, tmp_path / "var"))
    assert "no such folder; did you mean ./access_swarm?" in line
    assert not (tmp_path / "acces_swarm").exists() and not (tmp_path / "var").exists()


def test_an_empty_folder_is_refused_without_importing_dagster(tmp_path):
    """Before Dagster is imported (the bulk of a second) and before any store: checked in-process."""
    (tmp_path / "fresh").mkdir()
    probe = (
        "import sys\nfrom sabot_assets.cli import main\n"
        "try:\n    main(['wave', 'run', 'fresh'], standalone_mode=False)\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
        "print('dagster imported' if 'dagster' in sys.modules else 'dagster not imported')\n"
    )
    env = {**os.environ, "SABOT_VAR": str(tmp_path / "var")}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines() == [
        "TargetError fresh: an empty folder, not a project (no sabot/project.json); "
        "`sabot init fresh` scaffolds a project in it",
        "dagster not imported",
    ], done.stderr
    assert not (tmp_path / "var").exists()


@pytest.mark.parametrize(
    "args", [["wave", "run", "demoo"], ["wave", "export", "demoo", "out"], ["explain", "demoo", "--cell", "x|y"]]
)
def test_a_misspelt_wave_name_is_refused_with_the_registered_near_name(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 1
    assert (
        "'demoo': no registered wave of that name and no folder of that name here; did you mean 'demo'?" in done.output
    )
    assert not (tmp_path / "out").exists()


def test_an_unpriced_model_is_refused_under_a_budget_before_any_call_until_the_project_prices_it(tmp_path, monkeypatch):
    """The team's pipeline asks for `oncall-large` (its O4 target `oncall-mini`): neither is in the
    standard's price table, so a provider wave under --budget would count its calls at $0."""
    from adapters.scripted.reply import Reply
    from adapters.scripted.server import ScriptedModelServer
    from sabot.pricing import PriceTable
    from sabot.project_registry import ProjectRegistry

    copy = registered_copy(tmp_path)
    with ScriptedModelServer(lambda request: Reply(content="never asked")) as provider:
        monkeypatch.setenv("SABOT_MODEL_BASE_URL", provider.base_url)
        monkeypatch.setenv("SABOT_MODEL_API_KEY", "sk-test-not-a-key")
        done = CliRunner().invoke(main, ["wave", "run", str(copy), "--seed", "1", "--budget", "5"])
        assert done.exit_code == 1
        o4 = json.loads((copy / "sabot" / "operators.json").read_text())["O4"]["model"]
        assert (
            f"models 'oncall-large', '{o4}' of oncall_triage have no price, so its calls would count $0 against --budget; "
            f"price them in {copy}/sabot/prices.json"
        ) in done.output
        assert provider.exchanges == []  # refused before any call
    (copy / "sabot" / "prices.json").write_text(
        json.dumps(
            {"per_million_tokens": {"oncall-large": {"input": 3, "output": 12}, o4: {"input": 0.5, "output": 2}}}
        )
    )
    table = PriceTable.from_registry(ProjectRegistry.from_dir(copy))
    assert table.cost("oncall-large-2026-07-01", {"prompt_tokens": 1_000_000, "completion_tokens": 0}) == 3.0
    (copy / "sabot" / "prices.json").write_text('{"per_million_tokens": {"oncall-large": {"input": "3"}}}')
    done = CliRunner().invoke(main, ["wave", "run", str(copy), "--seed", "1", "--budget", "5"])
    assert done.exit_code == 1 and "prices.json: per_million_tokens.oncall-large: expected" in done.output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupting_project_check_ends_the_baselines_pipeline_process(signum, tmp_path):
    """The baseline's pipeline runs confined, in a session and PID namespace of its own (so a wall limit
    can kill all it started); a `project check` interrupted while it runs must take that sandbox down
    with it, down to a process the pipeline started. The pipeline cannot write outside its sandbox,
    so the test finds that process from outside, by a command line no other test uses."""
    copy = tmp_path / "refund_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", copy, ignore=shutil.ignore_patterns("__pycache__"))
    marker = f"600.{os.getpid()}{signum.value}"
    code = copy / "refund_desk.py"
    code.write_text(
        code.read_text().replace(
            '        order_id = re.search(r"\\bA-\\d+\\b", state["ticket"]).group(0)\n',
            f'        import subprocess, time\n        subprocess.Popen(["sleep", {marker!r}])\n        time.sleep(600)\n'
            '        order_id = re.search(r"\\bA-\\d+\\b", state["ticket"]).group(0)\n',
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SABOT_DB", "SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY")}
    # As from a terminal's foreground: a test run started as a background job inherits SIGINT ignored,
    # and a command that ignores Ctrl-C is not what this test is about.
    command = subprocess.Popen(
        [str(SABOT), "project", "check", str(copy)],
        cwd=tmp_path,
        env={**env, "SABOT_VAR": str(tmp_path / "var")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while not _started(marker) and command.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        started = _started(marker)
        assert started, "the baseline never started"
        assert os.getsid(started[0]) != os.getsid(
            command.pid
        )  # its own session: the terminal's Ctrl-C alone would not reach it
        command.send_signal(signum)
        assert command.wait(timeout=60) != 0
        assert not _alive(started[0], within=10)
    finally:
        if command.poll() is None:
            command.kill()


def _started(marker: str) -> list[int]:
    """Host pids of the processes whose command line is `sleep MARKER`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:2] == [
                b"sleep",
                marker.encode(),
            ]:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _alive(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except (FileNotFoundError, IndexError):
            return False
        if state == "Z":  # killed, waiting to be reaped by init
            return False
        time.sleep(0.2)
    return True


def test_a_folder_named_without_its_path_is_offered_as_one(tmp_path, monkeypatch):
    registered_copy(tmp_path, "access_swarm")
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["wave", "run", "acces_swarm"])
    assert (
        done.exit_code == 1
        and "'acces_swarm': no registered wave of that name and no folder of that name here; did you mean ./access_swarm?"
        in done.output
    )
