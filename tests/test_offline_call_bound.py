"""The registered per-run call bound applies offline as at a provider: a team pipeline that loops on a
persistent fault (its reviewer never approves) is stopped at the bound against its own test double,
RUN_ERROR naming the bound, every exchange it made kept (in its record and in its attempt's journal)."""

import json
import shutil
from pathlib import Path

from adapters.byo.runner import project_registry, run_project
from adapters.runner import RunSpec
from sabot.budget import Margin
from sabot.exchange_journal import ExchangeJournal, read_journal
from sabot.projects import Project
from sabot.runroot import Identity

ROOT = Path(__file__).resolve().parents[1]
LOOP = """

def build_graph():  # the test's loop: the decision is asked again until it is approved, with no limit of its own
    llm = ChatOpenAI(model=MODEL, max_retries=0)

    def decide_until_approved(state: Ticket) -> Ticket:
        while True:
            verdict = llm.invoke([SystemMessage("You decide refunds."), HumanMessage(state["ticket"])]).content
            if verdict.startswith("APPROVED"):  # the test double never says so: a persistent fault
                return {"verdict": verdict}

    graph = StateGraph(Ticket)
    graph.add_node("decide", decide_until_approved)
    graph.add_edge(START, "decide")
    graph.add_edge("decide", END)
    return graph.compile()
"""


def test_a_looping_pipeline_is_stopped_offline_at_the_registered_call_bound_with_its_exchanges_kept(
    tmp_path, monkeypatch
):
    for name in ("SABOT_MODEL_BASE_URL", "SABOT_MODEL_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # offline: the project's own test double answers
    copy = tmp_path / "looping_desk"
    shutil.copytree(
        ROOT / "examples" / "refund_desk", copy, ignore=shutil.ignore_patterns("__pycache__", "registry.lock.json")
    )
    (copy / "refund_desk.py").write_text((copy / "refund_desk.py").read_text() + LOOP)
    project = Project.load(copy)
    bound = Margin.from_registry(project_registry(project)).max_calls
    attempt = tmp_path / "attempt-1"
    attempt.mkdir()
    journal = ExchangeJournal(attempt).begin("looping", Identity("v", "simulation", "m", "d", 1), "now", "")
    outcome = run_project(
        RunSpec("refund_desk", 1, "langgraph", "own", "refund", None, 1), project, tmp_path / "runs", journal=journal
    )
    record = outcome.record
    assert record.error and f"the run's registered bound of {bound} calls is reached" in record.error, record.error
    exchanges = record.extra["exchanges"]
    assert sum(1 for x in exchanges if x["status"] == 200) == bound  # every answered call kept, none past the bound
    assert exchanges[-1]["status"] == 403 and "not sent" in json.dumps(
        exchanges[-1]["reply"]
    )  # the refused call, not sent
    _, journaled = read_journal(attempt)
    assert [x["n"] for _, x in journaled] == [
        x["n"] for x in exchanges
    ]  # the journal holds what a killed run would have left
