"""The README and docs/ are checked, not trusted: what they tell a reader to type exists.

The convention the pages follow: a ```bash block holds commands (a line indented under a command
continues it; `# ...` is a comment), any other fence is output. Checked here, in seconds:

- every `sabot ...` command is a real command path whose `--help` runs, and every option a page
  shows is one of that command's options;
- every script, benchmark, test file and installed command a command names exists (scripts parse
  with `bash -n`; an environment prefix such as `DAGSTER_HOME=...` is skipped);
- the README's two commands are exactly the set-up + demo wave and the set-up + test suite; `.ci/run`
  runs the second as it is, and the demo wave the first one runs is run whole by
  tests/test_live_wave.py (through `run_wave`, what `sabot wave run` calls), so it is not run twice;
- every figure quoted names where it comes from: in docs/figures.md, the section's benchmark; on
  any other page, the paragraph names a benchmark that exists or the setting the value is.
"""

import ast
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from sabot_assets.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SETUP_AND_DEMO = "bash scripts/setup.sh && .venv/bin/sabot wave run demo"
SETUP_AND_TESTS = "bash scripts/setup.sh && .venv/bin/pytest -q"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
DURATION = re.compile(r"\b\d[\d,]*(?:\.\d+)?\s?(?:ms|s|min|minutes)\b")
BENCH = re.compile(r"bench/(\w+\.py)")
SETTING = re.compile(r"SABOT_[A-Z_]+|data/[\w./-]+\.json")


def commands(page: Path) -> list[tuple[str, str]]:
    """(where, command) for every command line of the page's bash blocks, continuations joined."""
    text = page.read_text()
    found = []
    for block in FENCE.finditer(text):
        if block.group(1) != "bash":
            continue
        first_line = text[: block.start()].count("\n") + 2
        for offset, line in enumerate(block.group(2).splitlines()):
            line = re.sub(r"\s+#\s.*$", "", line).rstrip()
            if not line.strip():
                continue
            where = f"{page.relative_to(ROOT)}:{first_line + offset}"
            if line[0].isspace() and found:
                found[-1] = (found[-1][0], f"{found[-1][1]} {line.strip()}")
            else:
                found.append((where, line))
    return found


ALL_COMMANDS = [c for page in PAGES for c in commands(page)]


def test_the_pages_show_commands():
    assert len(PAGES) >= 10 and len(ALL_COMMANDS) >= 30, [p.name for p in PAGES]


def _sabot_command(words: list[str]):
    """The click command a `sabot` word list names, and the subcommand path to it."""
    command, path = main, []
    for word in words:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command, path = sub, [*path, word]
    return command, path


def _check_sabot(where: str, words: list[str]) -> None:
    command, path = _sabot_command(words)
    assert path and not hasattr(command, "commands"), f"{where}: `sabot {' '.join(words)}` is not a sabot command"
    done = CliRunner().invoke(main, [*path, "--help"])
    assert done.exit_code == 0, f"{where}: sabot {' '.join(path)} --help: {done.output}"
    known = {opt for param in command.params for opt in param.opts}
    shown = {w.strip("[]").split("=")[0] for w in words if w.strip("[]").startswith("--")}
    assert shown <= known, f"{where}: sabot {' '.join(path)} has no option {', '.join(sorted(shown - known))}"


def _check_one(where: str, line: str) -> None:
    for part in (p.strip() for p in line.split("&&")):
        evaluated = re.fullmatch(r'eval "\$\((.*)\)"', part)  # eval "$(CMD)": the command is CMD
        words = shlex.split(evaluated.group(1) if evaluated else part)
        while re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # an environment prefix: the command follows
            words = words[1:]
        tool, args = words[0], words[1:]
        if tool == ".venv/bin/sabot":
            _check_sabot(where, args)
        elif tool == "bash":
            script = ROOT / args[0]
            assert script.is_file(), f"{where}: no script {args[0]}"
            subprocess.run(["bash", "-n", str(script)], check=True)
        elif tool == ".venv/bin/python":
            bench = ROOT / args[0]
            assert bench.is_file(), f"{where}: no benchmark {args[0]}"
            source = bench.read_text()
            for opt in (w.strip("[]") for w in args[1:] if w.strip("[]").startswith("--")):
                assert f'"{opt}"' in source, f"{where}: {args[0]} has no option {opt}"
        elif tool == ".venv/bin/dagster-daemon":  # Dagster's own command: installed from the lock, files it reads exist
            assert (ROOT / tool).is_file(), f"{where}: {tool} is not installed by scripts/setup.sh"
            for value in (a for a in args if a.endswith(".yaml")):
                assert (ROOT / value).is_file(), f"{where}: no file {value}"
            home = next((w.split("=", 1)[1] for w in shlex.split(part) if w.startswith("DAGSTER_HOME=")), None)
            assert home is None or (ROOT / home / "dagster.yaml").is_file(), (
                f"{where}: DAGSTER_HOME={home} holds no dagster.yaml"
            )
        elif tool == ".venv/bin/pytest":
            for target in (a for a in args if not a.startswith("-")):
                assert (ROOT / target).exists(), f"{where}: no test file {target}"
        else:
            pytest.fail(f"{where}: a command this check does not know how to check: {part}")


@pytest.mark.parametrize(("where", "line"), ALL_COMMANDS, ids=[w for w, _ in ALL_COMMANDS])
def test_every_command_shown_is_real(where, line):
    _check_one(where, line)


def test_the_two_readme_commands_are_what_ci_and_the_tests_run():
    readme = [line for _, line in commands(ROOT / "README.md")]
    assert readme == [SETUP_AND_DEMO, SETUP_AND_TESTS]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert SETUP_AND_TESTS in ci_lines, ".ci/run no longer runs the README's test command as it is"
    # The main job is run whole by the demo fixture of test_live_wave.py, through the function the
    # `wave run` command calls; the CLI path itself runs a slice of it in test_ui_lineage.py.
    # Read as code (calls and argument lists), not as text, so that re-laying the files out changes nothing here.
    live = _calls(ROOT / "tests" / "test_live_wave.py")
    assert ("live_wave", ["registry", "tmp_path_factory", "'demo'"]) in live
    assert _functions(ROOT / "tests" / "test_live_wave.py").get("test_the_demo_wave_scores_all_eight_rows") == ["demo"]
    assert "run_wave" in {name for name, _ in _calls(ROOT / "sabot_assets" / "cli" / "wave.py")}
    assert any(
        args[1:4] == ["'wave'", "'run'", "'demo'"]
        for name, args in _calls(ROOT / "tests" / "test_ui_lineage.py")
        if name == "run"
    )


def _calls(path: Path) -> list[tuple[str, list[str]]]:
    """Every call in a Python file as (the called name, its arguments as source), a list literal's items
    standing for the list: `subprocess.run([exe, "wave", "run", "demo"])` -> ("run", [exe, 'wave', ...])."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = node.args[0].elts if len(node.args) == 1 and isinstance(node.args[0], ast.List) else node.args
            out.append((func, [ast.unparse(a) for a in args]))
    return out


def _functions(path: Path) -> dict[str, list[str]]:
    """Each function defined in a Python file -> its parameters' names."""
    tree = ast.parse(path.read_text())
    return {node.name: [a.arg for a in node.args.args] for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def _prose_paragraphs(text: str) -> list[str]:
    """Paragraphs outside fences; each table row is a paragraph of its own."""
    text = FENCE.sub("", text)
    out = []
    for para in re.split(r"\n\s*\n", text):
        rows = [line for line in para.splitlines() if line.startswith("|")]
        out.extend(rows if rows else [para])
    return out


def test_every_figure_names_its_benchmark():
    figures = ROOT / "docs" / "figures.md"
    section, checked = None, 0
    for number, line in enumerate(figures.read_text().splitlines(), 1):
        if line.startswith("## "):
            section = BENCH.findall(line)
            assert section, f"docs/figures.md:{number}: a figures section names no benchmark: {line}"
        elif DURATION.search(line):
            assert section, f"docs/figures.md:{number}: a figure outside a benchmark's section: {line}"
            checked += 1
    assert checked >= 20
    for page in PAGES:
        if page == figures:
            continue
        for para in _prose_paragraphs(page.read_text()):
            if DURATION.search(para):
                assert BENCH.search(para) or SETTING.search(para), (
                    f"{page.relative_to(ROOT)}: a figure that names neither the benchmark printing it nor the setting it is:\n{para}"
                )
    for page in PAGES:
        for script in BENCH.findall(page.read_text()):
            assert (ROOT / "bench" / script).is_file(), (
                f"{page.relative_to(ROOT)} names bench/{script}, which does not exist"
            )


def test_every_link_between_pages_resolves():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"
