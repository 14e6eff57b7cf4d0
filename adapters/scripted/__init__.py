"""Scripted OpenAI-compatible model server for running real agent frameworks offline."""

from adapters.scripted.server import Reply, Responder, ScriptedModelServer, ToolCall

__all__ = ["Reply", "Responder", "ScriptedModelServer", "ToolCall"]
