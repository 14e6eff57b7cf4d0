"""The stand-in provider a team's pipeline is run against on the built-in run path, with the provider key
it is called with and a call policy quick enough for tests: shared by the tests of the project's waves
and the tests of the pipeline's own process."""

from adapters.byo.confined_work import importable
from adapters.byo.runner import as_reply
from adapters.scripted.reply import Reply
from adapters.scripted.server import ScriptedModelServer
from sabot.plugins import resolve_path
from sabot.projects import Project

DATED = "2026-07-01"
KEY = "sk-provider-secret-4711"
QUICK_POLICY = {
    "retry": {
        "max_attempts": 2,
        "max_total_seconds": 5,
        "initial_backoff_seconds": 0.05,
        "max_backoff_seconds": 0.1,
        "jitter_seconds": 0.01,
        "max_retry_after_seconds": 1,
        "retry_on_status": [429, 500, 502, 503, 504],
    },
    "call_timeout_seconds": 10,
}


class Provider:
    """The stand-in provider: the project's test double, answering with dated ids and usage; or
    refusing every call as a wrong key does (401), or dead (503 to everything)."""

    def __init__(self, project: Project):
        with importable(project):
            self.double = resolve_path(project.doc["responder"])(1)
        self.mode = "serve"
        self.server = ScriptedModelServer(self.respond, dated=DATED)

    def respond(self, request: dict) -> Reply:
        if self.mode == "refuse":
            return Reply(status=401, error="Incorrect API key provided")
        if self.mode == "dead":
            return Reply(status=503, error="nobody is here")
        return as_reply(self.double(request))
