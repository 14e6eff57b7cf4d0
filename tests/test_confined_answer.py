"""The harness reads a team pipeline's answer as JSON only: a forged pickle runs nothing in it.

The confined process (adapters/byo/confine.py) is the scored party's: anything in it can write to
the pipe its answer comes back on. tests/hostile/forged_answer.py writes a pickle whose loading
would create a file in the harness's process (the one holding the seal key). Read as JSON, it is
refused: the file never appears, the run fails naming why, and the harness carries on.
"""

import functools
import shutil
import sys
from pathlib import Path

import pytest

from adapters.byo.answer import built_answer, run_answer
from adapters.byo.confine import AnswerRefused, ChildFailed, answer_of, run_confined
from sabot.projects import Project

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "hostile"
FORGER = HOSTILE / "forged_answer.py"
FORGING_FACTORY = """

_unforged_build_graph = build_graph


def build_graph():
    import forged_answer

    forged_answer.forge(%r)
    return _unforged_build_graph()
"""


@pytest.mark.parametrize("then", ["exit", "return"], ids=["instead of its answer", "before its answer"])
def test_a_forged_pickle_on_the_answer_channel_runs_nothing_in_the_harness(tmp_path, monkeypatch, then):
    monkeypatch.syspath_prepend(str(HOSTILE))
    monkeypatch.delitem(sys.modules, "forged_answer", raising=False)
    import forged_answer

    planted = tmp_path / "planted-by-unpickling"  # outside the sandbox: only the harness could create it
    try:
        refused = f"answered {run_confined(functools.partial(forged_answer.forge, str(planted), then), 60, HOSTILE)!r}"
    except AnswerRefused as exc:
        refused = str(exc)
    assert not planted.exists(), "the forged pickle ran in the harness's process"
    assert "not a JSON answer" in refused, refused


def test_a_team_pipeline_forging_its_answer_fails_its_run_naming_why_and_nothing_runs(tmp_path):
    from adapters.byo.check import check
    from adapters.byo.runner import run_project
    from adapters.runner import RunSpec

    project = tmp_path / "forging_desk"
    shutil.copytree(ROOT / "examples" / "refund_desk", project, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(FORGER, project / FORGER.name)
    planted = tmp_path / "planted-by-unpickling"
    with (project / "refund_desk.py").open("a") as factory:
        factory.write(FORGING_FACTORY % str(planted))

    outcome = run_project(
        RunSpec("forging_desk", 1, "langgraph", "own", "refund", None, 1), Project.load(project), tmp_path / "runs"
    )
    assert not planted.exists(), "the forged pickle ran in the harness's process"
    error = outcome.record.error
    assert error and "refund_desk:build_graph (refund_desk.py)" in error and "not a JSON answer" in error, error
    assert "attempt" not in error  # a team's fault, not retried as infrastructure
    report = check(project)  # the static check builds the factory confined too
    assert any("not a JSON answer" in problem for problem in report.problems), report.problems
    assert not planted.exists()


def test_an_answer_is_json_of_one_form_or_refused_naming_what_is_wrong():
    assert answer_of(b'{"ok": [1, "two"]}') == [1, "two"]
    with pytest.raises(ChildFailed) as failed:
        answer_of(b'{"error": ["KeyError", "no such refund", "trace"]}')
    assert (failed.value.kind, failed.value.message) == ("KeyError", "no such refund")
    for data in (
        b"\x80\x04K\x01.",
        b"[" * 100_000,
        b'{"ok": 1, "error": 2}',
        b'{"error": ["only a type"]}',
        b"\xff\xfe",
    ):
        with pytest.raises(AnswerRefused):
            answer_of(data)


def test_a_runs_answer_is_checked_field_by_field():
    good = {
        "events": [[1, "drafter", "tool_call", {"tool": "x"}]],
        "tools_wrapped": ["lookup"],
        "pass": {"passed": True, "output": "ok"},
    }
    read = run_answer(good)
    assert read["tools_wrapped"] == ["lookup"] and read["events"] == [(1, "drafter", "tool_call", {"tool": "x"})]
    assert run_answer({"infrastructure": "ConnectionError: refused"}) == {"infrastructure": "ConnectionError: refused"}
    for broken, named in (
        ({**good, "events": [[1, "drafter", "tool_call", "not a dict"]]}, "event 0"),
        ({**good, "tools_wrapped": "lookup"}, "'tools_wrapped'"),
        ({**good, "pass": {"passed": 1, "output": "ok"}}, "'pass'"),
        ({"infrastructure": 3}, "'infrastructure'"),
        ([], "not a JSON object"),
    ):
        with pytest.raises(AnswerRefused, match=named):
            run_answer(broken)
    assert built_answer([["a problem"], "graph", ["gpt-5.6-luna"]]) == (["a problem"], "graph", {"gpt-5.6-luna"})
    with pytest.raises(AnswerRefused, match="model ids"):
        built_answer([[], None, [1]])
