"""A built-in row's pipeline (LangGraph's) that first runs the hostile probe, then does its job.

Registered in place of the standard's LangGraph pipeline by tests/hostile/builtin_wave.py only, so
the probe runs exactly where every built-in row's pipeline code runs. Where the harness keeps
things reaches it in HOSTILE_TARGETS (as anyone who read the project's docs would know them).
"""

import json
import os
from pathlib import Path

import hostile_probe

from adapters.langgraph_pipeline import LangGraphPipeline


class HostileLangGraph(LangGraphPipeline):
    def run(self):
        hostile_probe.probe_targets(json.loads(os.environ["HOSTILE_TARGETS"]), Path(__file__).resolve().parent)
        return super().run()
