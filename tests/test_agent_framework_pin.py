"""Microsoft Agent Framework, the standard's named wave-2 candidate, is installed at the candidate
pins beside the other frameworks, and exposes the names the built-in rows build on."""

import importlib.metadata
import tomllib
from pathlib import Path

PINS = {"agent-framework-core": "1.12.0", "agent-framework-orchestrations": "1.0.1", "agent-framework-openai": "1.11.0"}
ROOT = Path(__file__).resolve().parents[1]


def test_the_candidate_pins_are_locked_and_installed_beside_the_other_frameworks():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name, version in PINS.items():
        assert f"{name}=={version}" in declared
        assert importlib.metadata.version(name) == version
    # the other frameworks' pins did not move to make room (openai is the shared client)
    assert importlib.metadata.version("openai") == "2.54.0"
    for name, version in {
        "langchain-openai": "1.4.0",
        "crewai": "1.15.5",
        "autogen-ext": "0.7.5",
        "autogen-agentchat": "0.7.5",
    }.items():
        assert importlib.metadata.version(name) == version


def test_the_surfaces_the_rows_read_exist_at_the_pin():
    from agent_framework import AgentMiddleware, ChatMiddleware, FunctionMiddleware, MiddlewareTermination
    from agent_framework.openai import OpenAIChatCompletionClient
    from agent_framework.orchestrations import (
        GroupChatBuilder,
        MagenticBuilder,
        MagenticOrchestratorEventType,
        SequentialBuilder,
        StandardMagenticManager,
    )

    assert {e.value for e in MagenticOrchestratorEventType} == {"plan_created", "replanned", "progress_ledger_updated"}
    assert issubclass(MiddlewareTermination, Exception)
    assert all(
        callable(c)
        for c in (
            AgentMiddleware,
            ChatMiddleware,
            FunctionMiddleware,
            OpenAIChatCompletionClient,
            GroupChatBuilder,
            MagenticBuilder,
            SequentialBuilder,
            StandardMagenticManager,
        )
    )
