"""Scripted OpenAI-compatible model server for running real agent frameworks offline."""

from adapters.scripted.latency import Latency
from adapters.scripted.reply import Reply, Responder, ToolCall
from adapters.scripted.server import ScriptedModelServer

__all__ = ["Latency", "Reply", "Responder", "ScriptedModelServer", "ToolCall"]
