"""Scripted OpenAI-compatible model server for running real agent frameworks offline."""

from adapters.scripted.server import Latency, Reply, Responder, ScriptedModelServer, ToolCall

__all__ = ["Latency", "Reply", "Responder", "ScriptedModelServer", "ToolCall"]
