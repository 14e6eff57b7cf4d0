"""The file server beside the UI, over real HTTP on 127.0.0.1: every link the asset metadata makes
is an http address it answers, whichever command built the asset; a sealed run record reads as
pages (overview with its seal, events, model exchanges, raw files), never the simulator's intent."""

import json
import socket
import urllib.error
import urllib.request

import pytest

from sabot import runroot
from sabot.matrix import Probe
from sabot.runroot import Identity
from sabot.trace import Event, RunRecord
from sabot_assets.file_server.addresses import DEFAULT_FILES_URL, FILES_URL_ENV, record_url, report_url
from sabot_assets.file_server.server import serve

PROMPT, REPLY, ERROR = (
    "Extract the inspection record.",
    '{"unit_id": "P-3117-D"}',
    "provider http://127.0.0.1:9/v1 refused",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A store directory with one sealed attempt and one report, and the file server over it."""
    store = tmp_path / "store"
    probe = Probe("langgraph", "default", "T1", 11)
    directory = runroot.allocate(store / "runroot", "demo", probe, "O5")
    exchange = {
        "n": 1,
        "model": "gpt-5.6-terra",
        "method": "POST",
        "path": "/v1/chat/completions",
        "status": 200,
        "request": {"messages": [{"role": "user", "content": PROMPT}]},
        "reply": {"choices": [{"message": {"role": "assistant", "content": REPLY}}]},
    }
    events = (
        Event(1, "extractor", "tool-call", {"tool": "load_context", "output": "LOGGER SHEET Rev A", "injected": True}),
        Event(2, "reviewer", "guardrail-event", {"act": "reject", "reason": "figures disagree"}),
    )
    record = RunRecord(
        "demo-run",
        "langgraph",
        "default",
        "T1",
        "O5",
        11,
        events,
        1,
        True,
        True,
        ERROR,
        extra={"exchanges": [exchange]},
    )
    identity = Identity("runner-v1", "simulation (scripted model on 127.0.0.1)", "gpt-5.6-terra", "gpt-5.6-luna", 2)
    runroot.write_attempt(
        directory,
        "demo",
        record,
        "complete",
        identity,
        [{"secret": "the intent"}],
        "dagster-run-1",
        runroot.started_now(),
    )
    (store / "reports" / "demo").mkdir(parents=True)
    (store / "reports" / "demo" / "index.html").write_text("<h1>demo report</h1>")
    port = _free_port()
    monkeypatch.setenv(FILES_URL_ENV, f"http://127.0.0.1:{port}")
    server = serve(store, port, "http://127.0.0.1:3000")
    yield directory.relative_to(store / "runroot").as_posix() + "/runresult.json", directory
    server.shutdown()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.headers["Content-Type"], reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_links_are_http_to_the_default_server_when_nothing_is_configured(monkeypatch):
    monkeypatch.delenv(FILES_URL_ENV, raising=False)
    assert report_url("demo/index.html") == f"{DEFAULT_FILES_URL}/reports/demo/index.html"
    assert (
        record_url("demo/langgraph/default/T1/O1/seed11/attempt-2/runresult.json", "events")
        == f"{DEFAULT_FILES_URL}/runs/demo/langgraph/default/T1/O1/seed11/attempt-2/events"
    )


def test_a_report_link_loads(served):
    status, kind, body = _get(report_url("demo/index.html"))
    assert (status, kind.split(";")[0], body) == (200, "text/html", "<h1>demo report</h1>")


def test_a_sealed_record_reads_as_pages(served):
    source, _ = served
    status, _, overview = _get(record_url(source))
    assert (
        status == 200
        and "Sealed: every file below matches its seal" in overview
        and "O5|langgraph.default.T1.s11" in overview
    )
    assert ERROR in overview
    _, _, events = _get(record_url(source, "events"))
    assert "figures disagree" in events and "The fault was planted at event 1" in events and "id='seq-2'" in events
    _, _, listing = _get(record_url(source, "exchanges"))
    assert "exchange 1</a>: gpt-5.6-terra" in listing
    _, _, one = _get(record_url(source, "exchanges/1"))
    assert PROMPT in one and "P-3117-D" in one
    status, kind, raw = _get(record_url(source, "raw/runresult.json"))
    assert status == 200 and kind.startswith("text/plain") and json.loads(raw)["trace"]["run_id"] == "demo-run"


def test_the_scripted_models_intent_is_never_served(served):
    source, _ = served
    status, _, body = _get(record_url(source, "raw/intent.json"))
    assert status == 404 and "serves no raw file 'intent.json'" in body
    assert all(
        "the intent" not in _get(record_url(source, page))[2] for page in ("", "events", "exchanges", "exchanges/1")
    )


def test_an_edited_record_says_it_is_not_evidence(served):
    source, directory = served
    (directory / "runresult.json").write_text(
        (directory / "runresult.json").read_text().replace("figures disagree", "figures agree")
    )
    _, _, events = _get(record_url(source, "events"))
    assert "Not evidence: attempt" in events and "differs from its seal" in events and "Sealed:" not in events


def test_what_is_not_there_is_one_line_naming_it(served):
    source, _ = served
    assert _get(record_url(source, "exchanges/7"))[:2][0] == 404
    status, _, body = _get(record_url("demo/langgraph/default/T9/O5/seed11/attempt-1/runresult.json"))
    assert status == 404 and "no finished attempt at runs/demo/langgraph/default/T9/O5/seed11/attempt-1" in body
    status, _, body = _get(report_url("../runroot/demo"))
    assert status == 404


def test_ui_addresses_redirect_to_the_dagster_ui(served):
    base = report_url("x").split("/reports/")[0]
    request = urllib.request.Request(f"{base}/ui/assets/demo/cell_verdicts?view=partitions")

    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.build_opener(NoFollow).open(request, timeout=10)
    assert (
        caught.value.code == 302
        and caught.value.headers["Location"] == "http://127.0.0.1:3000/assets/demo/cell_verdicts?view=partitions"
    )
