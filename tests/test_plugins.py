"""The plug-in registry: decorators, lazy "module:attr" targets, entry points, and the built-ins on it."""

import subprocess
import sys
from importlib import metadata

import pytest

from sabot import plugins


@pytest.fixture
def scratch_module(tmp_path, monkeypatch):
    """A module on sys.path that the registry must not import before it is looked up."""
    (tmp_path / "scratch_plugin_mod.py").write_text("IMPORTED = True\nclass Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("scratch_plugin_mod", None)
    yield "scratch_plugin_mod"
    sys.modules.pop("scratch_plugin_mod", None)
    for kind in plugins.KINDS:
        for name in ("scratch", "scratch2"):
            plugins.unregister(kind, name)


def test_decorator_registers_and_duplicates_are_refused(scratch_module):
    @plugins.register("responder", "scratch")
    def respond(request):
        return "hi"

    assert plugins.lookup("responder", "scratch") is respond
    plugins.register("responder", "scratch", respond)  # the same object again is harmless
    with pytest.raises(plugins.PluginError, match="already registered"):
        plugins.register("responder", "scratch", lambda r: "other")
    with pytest.raises(plugins.PluginError, match="unknown plug-in kind"):
        plugins.register("judge", "scratch", respond)
    with pytest.raises(plugins.PluginError, match="no responder named 'nope'"):
        plugins.lookup("responder", "nope")


def test_lazy_target_imports_only_on_first_use(scratch_module):
    plugins.register("pipeline", "scratch", f"{scratch_module}:Thing")
    assert "scratch" in plugins.registered("pipeline")
    assert scratch_module not in sys.modules
    thing = plugins.lookup("pipeline", "scratch")
    assert thing.__name__ == "Thing" and scratch_module in sys.modules
    plugins.register("pipeline", "scratch2", f"{scratch_module}:Missing")
    with pytest.raises(plugins.PluginError, match="has no attribute 'Missing'"):
        plugins.lookup("pipeline", "scratch2")


def test_entry_points_register_lazily(scratch_module, monkeypatch):
    eps = [
        metadata.EntryPoint(name="operator.scratch", value=f"{scratch_module}:Thing", group=plugins.ENTRY_POINT_GROUP)
    ]
    monkeypatch.setattr(
        plugins.metadata, "entry_points", lambda group: eps if group == plugins.ENTRY_POINT_GROUP else []
    )
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    assert "scratch" in plugins.names("operator")
    assert scratch_module not in sys.modules
    assert plugins.lookup("operator", "scratch").__name__ == "Thing"


def test_bad_entry_point_name_is_named(monkeypatch):
    eps = [metadata.EntryPoint(name="O9", value="x:y", group=plugins.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: eps)
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    with pytest.raises(plugins.PluginError, match="entry point 'O9'.*'kind.name'"):
        plugins.names("operator")


def test_built_ins_are_plug_ins():
    import adapters.runner
    import operators
    from adapters.scripted import skills
    from sabot import tasks

    assert {"langgraph", "crewai", "autogen"} <= set(adapters.runner.PIPELINES)
    assert {f"O{i}" for i in range(1, 7)} <= set(plugins.names("operator"))
    assert {f"T{i}" for i in range(1, 6)} <= set(plugins.names("pass_criterion"))
    assert skills.skill("T2").__name__ == "adapters.scripted.skills_t2"
    fault = operators.make_fault("O4", {"O4": {"seam": "model_config"}}, "weak-model")
    assert type(fault).__name__ == "ModelDowngrade" and fault.model_for("worker", "strong") == "weak-model"
    assert tasks.passes("T1", "/nonexistent") is False
    # A team's project runner is a plug-in too: the built-in runner reaches it only through the registry.
    from adapters.byo.runner import run_project

    assert plugins.lookup("runner", "project") is run_project


def test_a_new_operator_needs_only_its_own_module(scratch_module, tmp_path):
    import operators

    (tmp_path / "scratch_plugin_mod.py").write_text(
        "from operators.faults import Fault\nfrom sabot import plugins\n\n"
        "@plugins.register('operator', 'scratch')\nclass Shout(Fault):\n"
        "    def handoff(self, text):\n        self.landed = True\n        return text.upper()\n"
    )
    import scratch_plugin_mod  # noqa: F401  (what an entry point or the operators package import does)

    fault = operators.make_fault("scratch", {"scratch": {}}, "weak")
    assert fault.handoff("abc") == "ABC" and fault.landed


def test_loading_the_runner_imports_no_framework():
    code = (
        "import sys, adapters.runner, sabot.tasks, operators; "
        "bad = [m for m in ('langgraph', 'crewai', 'autogen_agentchat', 'langchain_openai') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
