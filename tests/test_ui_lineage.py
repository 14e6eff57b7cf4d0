"""Lineage in the Dagster UI, as an auditor clicks through it: a real browser against the real UI.

Debian's chromium, driven by Selenium through Debian's chromedriver (`scripts/install_chromium.sh`
installs both; a test tool's own browser download does not work offline), against `scripts/ui.sh`
on 127.0.0.1, over a store made by `sabot wave run`: one slice of the demo wave run against the
scripted model, then one cell against an endpoint where nothing listens (RUN_ERROR).

- a cell's `cell_verdicts` partition shows that cell's own verdict, per ruleset, and the attempt
  and record hash it read, as the store holds them;
- a scoreboard number's link opens exactly its cells in the partitions view;
- a published rate (MISSED) opens the page of exactly its cells; one MISSED cell shows its §2
  outcome and leads to its judge verdict, its baseline, its events and one model exchange, each
  page showing what the store and the sealed record hold;
- the report's link is an http page that loads, though the wave ran from the command line;
- the RUN_ERROR cell is Failed in the partitions view; its step failure's first line and its
  partition's observation lead with the reason.

`SABOT_UI_SCREENSHOTS=DIR` keeps the screenshots (docs/dagster-ui.md shows them from docs/images).
"""

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from sabot.registry import Registry
from sabot.store.db import connect
from sabot.store.published import read_report
from tests.spans import span_keys
from tests.ui_browser import chromium, click, metadata_link, open_page, screenshot, scroll_to, wait_for

PROJECT = Path(__file__).resolve().parents[1]
UI_PORT = int(os.environ.get("SABOT_UI_TEST_PORT", "3593"))
FILES_URL = f"http://127.0.0.1:{UI_PORT + 10}"  # the file server beside the UI; the command-line wave links it too
DEAD_ENDPOINT = "http://127.0.0.1:3594/v1"  # nothing listens here
VERDICT_CELL = "O5|langgraph.default.T1.s11"  # detected under the scripted model's seed: it has deciding acts
FAILED_CELL = "O1|langgraph.default.T2.s11"
DIALOG = "//*[@role='dialog' or contains(@class, 'bp5-dialog')]"


def _env(var: Path, **extra) -> dict:
    drop = (
        "SABOT_MODEL_BASE_URL",
        "SABOT_MODEL_API_KEY",
        "SABOT_DB",
        "DAGSTER_HOME",
        "SABOT_DAGSTER_STORAGE",
        "SABOT_UI_URL",
        "SABOT_REPORTS_URL",
    )
    return {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "SABOT_VAR": str(var),
        "SABOT_REPORTS_URL": FILES_URL,
        **extra,
    }


def _wave(var: Path, *args, **extra) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(PROJECT / ".venv/bin/sabot"),
            "wave",
            "run",
            "demo",
            "--framework",
            "langgraph",
            "--config",
            "default",
            *args,
        ],
        env=_env(var, **extra),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    var = tmp_path_factory.mktemp("ui_lineage")
    good = _wave(var, "--task", "T1")
    assert good.returncode == 0, good.stderr[-3000:]
    quick = var / "quick_call_policy.json"  # the registered policy spends about a minute a run on a dead endpoint
    # RUN_ERROR cells are the subject here, not the endpoint breaker (tests/test_provider_faults.py): kept closed
    quick.write_text(
        '{"retry": {"max_attempts": 2, "initial_backoff_seconds": 0.05, "jitter_seconds": 0.05}, "breaker": {"consecutive_failures": 1000}}'
    )
    bad = _wave(
        var,
        "--task",
        "T2",
        "--operator",
        "O1",
        SABOT_MODEL_BASE_URL=DEAD_ENDPOINT,
        SABOT_MODEL_API_KEY="sk-test",
        SABOT_CALL_POLICY=str(quick),
    )
    assert bad.returncode == 1 and FAILED_CELL in bad.stdout + bad.stderr, bad.stdout[-3000:] + bad.stderr[-3000:]
    return var


@pytest.fixture(scope="module")
def ui(store):
    """scripts/ui.sh on UI_PORT over the store; stopped (its whole process group) at the end."""
    log = open(store / "ui.log", "w")
    proc = subprocess.Popen(
        ["bash", "scripts/ui.sh"],
        cwd=PROJECT,
        env=_env(store, PORT=str(UI_PORT), REPORTS_PORT=str(UI_PORT + 10)),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/server_info", timeout=5)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (store / "ui.log").read_text()[-3000:]
                time.sleep(1)
        yield f"http://127.0.0.1:{UI_PORT}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # only the group this fixture started
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def _stored_verdict(store: Path, key: str) -> dict:
    operator, probe = key.split("|")
    with connect(store / "sabot.duckdb", read_only=True) as con:
        names = ("ruleset", "status", "detected_hard", "fault_run_id", "fault_sha256")
        rows = con.execute(
            f"SELECT {', '.join(names)} FROM cell_verdicts WHERE wave = 'demo' AND operator = ? AND probe = ? ORDER BY ruleset",
            [operator, probe],
        ).fetchall()
        attempt = con.execute(
            "SELECT attempt FROM runs WHERE wave = 'demo' AND operator = ? AND probe = ?", [operator, probe]
        ).fetchone()[0]
    return {"rows": [dict(zip(names, r)) for r in rows], "attempt": attempt}


def test_a_cell_partition_shows_its_own_verdict(ui, browser, store):
    stored = _stored_verdict(store, VERDICT_CELL)
    open_page(browser, f"{ui}/assets/demo/cell_verdicts?view=partitions&partition={VERDICT_CELL.replace('|', '%7C')}")
    table = wait_for(browser, "//td[normalize-space()='verdicts by ruleset']/following-sibling::td//table")
    scroll_to(browser, browser.find_element("xpath", "//td[normalize-space()='verdict']"))
    rendered = [
        [c.text for c in row.find_elements("xpath", "./td")] for row in table.find_elements("xpath", ".//tbody/tr")
    ]
    assert [r[0] for r in rendered] == [
        r["ruleset"] + (" (headline)" if r["ruleset"] == "v0.2.0" else "") for r in stored["rows"]
    ]
    assert [r[1] for r in rendered] == [r["status"] for r in stored["rows"]]  # "valid" for this cell
    assert [r[4] for r in rendered] == ["yes" if r["detected_hard"] else "no" for r in stored["rows"]]
    head = next(r for r in stored["rows"] if r["ruleset"] == "v0.2.0")
    read = browser.find_element("xpath", "//td[normalize-space()='fault run read']/following-sibling::td").text
    assert (
        read.replace("\n", "")
        == f"attempt {stored['attempt']}, run {head['fault_run_id']}, record sha256 {head['fault_sha256']}"
    )
    with connect(store / "sabot.duckdb", read_only=True) as con:
        acts = con.execute(
            "SELECT seq, surface, act FROM acts WHERE wave = 'demo' AND ruleset = 'v0.2.0' AND operator || '|' || probe = ? ORDER BY seq",
            [VERDICT_CELL],
        ).fetchall()
    deciding = browser.find_element(
        "xpath", "//td[normalize-space()='deciding acts (v0.2.0)']/following-sibling::td//table"
    )
    shown = [
        [c.text for c in row.find_elements("xpath", "./td")] for row in deciding.find_elements("xpath", ".//tbody/tr")
    ]
    assert acts and [(int(r[0]), r[1], r[2].split(" by ")[0]) for r in shown] == acts
    explain = browser.find_element("xpath", "//td[normalize-space()='explain']/following-sibling::td").text
    assert explain == f"sabot explain demo --cell '{VERDICT_CELL}'"
    screenshot(browser, "cell-verdict.png")


def test_a_scoreboard_number_opens_exactly_its_cells(ui, browser, store):
    with connect(store / "sabot.duckdb", read_only=True) as con:
        valid = sorted(
            con.execute(
                "SELECT operator || '|' || probe FROM cell_verdicts WHERE wave = 'demo' AND ruleset = 'v0.2.0' "
                "AND framework = 'langgraph' AND config = 'default' AND status = 'valid'"
            ).fetchall()
        )
    open_page(browser, f"{ui}/assets/demo/scoreboard")
    show = wait_for(
        browser,
        "//td[normalize-space()='cells: langgraph/default']/following-sibling::td[last()]"
        "//*[normalize-space()='[Show Markdown]' and not(*[normalize-space()='[Show Markdown]'])]",
    )
    click(browser, show)
    dialog = wait_for(browser, f"{DIALOG}//table")
    headers = [h.text for h in dialog.find_elements("xpath", ".//thead//th")]
    valid_col = headers.index("valid")
    # Every valid count of every operator is a link; it opens exactly that operator's valid cells.
    probes = [p.key for p in Registry().wave("demo").probes()]
    opened = []
    for row in dialog.find_elements("xpath", ".//tbody/tr")[:-1]:  # the last row is the totals
        operator = row.find_elements("xpath", "./td")[0].text
        link = row.find_elements("xpath", "./td")[valid_col].find_element("xpath", ".//a")
        query = parse_qs(urlparse(link.get_attribute("href")).query)
        assert query["view"] == ["partitions"] and query["operator_range"] == [operator]
        selected = span_keys(query["probe_range"][0], probes)
        opened += [f"{operator}|{probe}" for probe in selected]
        assert int(link.text) == len(selected)
    assert sorted(opened) == [key for (key,) in valid]
    screenshot(browser, "number-cells-links.png")
    # Follow one: the partitions view lists exactly those probes for that operator.
    first = dialog.find_elements("xpath", ".//tbody/tr")[0]
    operator = first.find_elements("xpath", "./td")[0].text
    link = first.find_elements("xpath", "./td")[valid_col].find_element("xpath", ".//a")
    expected = span_keys(parse_qs(urlparse(link.get_attribute("href")).query)["probe_range"][0], probes)
    click(browser, link)
    wait_for(browser, f"//*[normalize-space()='{operator}']")
    probe_list = wait_for(browser, f"//*[normalize-space()='{expected[0]}']")
    scroll_to(browser, probe_list)
    time.sleep(3)
    assert "operator_range" in browser.current_url
    listed = [
        e.text for e in browser.find_elements("xpath", "//*[starts-with(normalize-space(), 'langgraph.') and not(*)]")
    ]
    assert sorted(set(listed) - {""}) == sorted(expected)
    screenshot(browser, "number-cells.png")


def test_a_run_error_cell_is_failed_with_its_reason(ui, browser, store):
    with connect(store / "sabot.duckdb", read_only=True) as con:
        error = con.execute(
            "SELECT error FROM attempts WHERE wave = 'demo' AND operator = 'O1' AND probe = 'langgraph.default.T2.s11' "
            "AND outcome = 'run_error'"
        ).fetchone()[0]
    assert DEAD_ENDPOINT in error
    open_page(browser, f"{ui}/assets/demo/fault_runs?view=partitions&partition={FAILED_CELL.replace('|', '%7C')}")
    wait_for(browser, "//*[contains(normalize-space(), 'failed, and did not materialize this asset')]")
    failed_filter = wait_for(
        browser,
        "//*[starts-with(normalize-space(), 'Failed (') and not(*[starts-with(normalize-space(), 'Failed (')])]",
    )
    assert failed_filter.text.strip() == "Failed (1)"
    screenshot(browser, "failed-cell.png")
    events = wait_for(browser, "//button[starts-with(normalize-space(), 'View all historical events')]")
    click(browser, events)
    row = wait_for(browser, f"{DIALOG}//tbody/tr[1]")
    click(browser, row)
    reason = wait_for(browser, f"{DIALOG}//td[normalize-space()='RUN_ERROR reason']/following-sibling::td[1]")
    assert reason.text.strip() == error
    assert "Traceback" not in reason.text and "Stack Trace" not in reason.text
    first = reason.find_element("xpath", "./ancestor::table[1]//tr[1]/td[1]")
    assert first.text.strip() == "RUN_ERROR reason"  # the first line of the observation's metadata
    scroll_to(browser, reason)
    screenshot(browser, "failed-cell-reason.png")
    # The failed partition's "View logs": the step failure's first line is the reason; the stack trace stays folded.
    open_page(browser, f"{ui}/assets/demo/fault_runs?view=partitions&partition={FAILED_CELL.replace('|', '%7C')}")
    click(browser, wait_for(browser, "//button[normalize-space()='View logs']"))
    failure = wait_for(
        browser, "//div[contains(@class, 'LogsRowComponents_row')][.//span[@data-tooltip='STEP_FAILURE']]"
    )
    lines = failure.text.splitlines()
    message = lines[lines.index("STEP_FAILURE") + 1 :]  # after the time, step and event type columns
    assert message[0] == f"dagster._core.definitions.events.Failure: {FAILED_CELL}: RUN_ERROR: {error}"
    assert "Stack Trace:" not in failure.text and 'File "' not in failure.text
    scroll_to(browser, failure)
    screenshot(browser, "failed-cell-logs.png")


def _missed_cells(store: Path) -> list[str]:
    with connect(store / "sabot.duckdb", read_only=True) as con:
        return sorted(
            k
            for (k,) in con.execute(
                "SELECT v.operator || '|' || v.probe FROM cell_verdicts v JOIN judge_verdicts j USING (wave, operator, probe) WHERE v.wave = 'demo' "
                "AND v.ruleset = 'v0.2.0' AND v.status = 'valid' AND NOT v.detected_hard AND j.prompt_variant = 0 AND j.status = 'ok' AND NOT j.noticed"
            ).fetchall()
        )


def test_a_published_rate_opens_its_cells_and_a_missed_cell_its_whole_record(ui, browser, store):
    missed = _missed_cells(store)
    with connect(store / "sabot.duckdb", read_only=True) as con:
        valid = con.execute(
            "SELECT count(*) FROM cell_verdicts WHERE wave = 'demo' AND ruleset = 'v0.2.0' AND status = 'valid'"
        ).fetchone()[0]
    assert missed, "the scripted model's demo slice has MISSED cells"
    # The published MISSED rate on the scoreboard is one link, to the page of exactly its cells.
    open_page(browser, f"{ui}/assets/demo/scoreboard")
    click(
        browser,
        wait_for(
            browser,
            "//td[normalize-space()='scoreboard']/following-sibling::td[last()]"
            "//*[normalize-space()='[Show Markdown]' and not(*[normalize-space()='[Show Markdown]'])]",
        ),
    )
    rate = wait_for(browser, f"{DIALOG}//a[contains(@href, '/reports/demo/cells/langgraph_default/missed.html')]")
    assert rate.text == f"{100 * len(missed) / valid:.1f}% ({len(missed)}/{valid}, simulation)"
    assert rate.get_attribute("href").startswith(f"{FILES_URL}/reports/")
    scroll_to(browser, rate)
    screenshot(browser, "rate-link.png")
    browser.get(rate.get_attribute("href"))
    listed = [a.text for a in browser.find_elements("xpath", "//li/a")]
    assert sorted(listed) == missed
    screenshot(browser, "rate-cells.png")
    # One MISSED cell: its partition says MISSED, decided by both tiers, with the judge's ruling.
    cell = missed[0]
    click(browser, browser.find_element("xpath", f"//li/a[normalize-space()='{cell}']"))
    outcome = wait_for(browser, "//td[normalize-space()='§2 outcome (v0.2.0)']/following-sibling::td")
    assert browser.current_url.startswith(ui) and outcome.text == "MISSED"
    assert browser.find_element(
        "xpath", "//td[normalize-space()='judge ruling']/following-sibling::td"
    ).text.startswith("not noticed")
    scroll_to(browser, outcome)
    screenshot(browser, "missed-cell.png")
    judge, baseline, events, exchanges = (
        metadata_link(browser, label)
        for label in ("judge verdict partition", "baseline partition", "fault run events", "fault run model exchanges")
    )
    # Its judge verdict, on the judge's own partition.
    open_page(browser, judge)
    noticed = wait_for(browser, "//td[normalize-space()='variant 0: noticed']/following-sibling::td")
    assert (
        noticed.text == "no"
        and "/judge_verdicts" in browser.current_url
        and browser.find_elements("xpath", f"//*[normalize-space()='{cell}']")
    )
    screenshot(browser, "missed-cell-judge.png")
    # Its baseline, on the baseline's partition (the probe), as the store holds it.
    with connect(store / "sabot.duckdb", read_only=True) as con:
        passed = con.execute(
            "SELECT task_passed FROM runs WHERE wave = 'demo' AND operator = '' AND probe = ?", [cell.split("|")[1]]
        ).fetchone()[0]
    open_page(browser, baseline)
    shown = wait_for(browser, "//td[normalize-space()='outcome']/following-sibling::td")
    assert shown.text == ("task passed" if passed else "task not passed")
    screenshot(browser, "missed-cell-baseline.png")
    # Its events and one model exchange, from the sealed record, on the file server.
    operator, probe = cell.split("|")
    framework, config, task, seed = probe.split(".")
    record = json.loads(
        (
            store
            / "runroot"
            / "demo"
            / framework
            / config
            / task
            / operator
            / f"seed{seed[1:]}"
            / "attempt-1"
            / "runresult.json"
        ).read_text()
    )
    browser.get(events)
    assert browser.find_element("tag name", "h1").text == f"Events: demo {cell}, attempt 1"
    assert "Sealed: every file below matches its seal" in browser.page_source
    assert len(browser.find_elements("xpath", "//tbody/tr[starts-with(@id, 'seq-')]")) == len(record["trace"]["events"])
    screenshot(browser, "missed-cell-events.png")
    browser.get(exchanges)
    click(browser, browser.find_element("xpath", "//li/a[normalize-space()='exchange 1']"))
    assert browser.find_element("tag name", "h1").text == f"Model exchange 1: demo {cell}, attempt 1"
    first = record["exchanges"][0]
    shown = [p.text for p in browser.find_elements("xpath", "//h2[.='Request']/following-sibling::table[1]//pre")]
    assert shown == [m["content"].strip() for m in first["request"]["messages"]]
    reply = browser.find_element("xpath", "//h2[.='Reply']/following-sibling::pre[1]").text
    assert reply == first["reply"]["choices"][0]["message"]["content"].strip()
    screenshot(browser, "missed-cell-exchange.png")


def test_a_report_link_is_an_http_page_that_loads(ui, browser, store):
    with connect(store / "sabot.duckdb", read_only=True) as con:
        html = read_report(con, "demo", "v0.2.0", "html")
    open_page(browser, f"{ui}/assets/demo/report")
    link = wait_for(browser, f"//a[starts-with(@href, '{FILES_URL}/reports/demo/index.html')]")
    assert not browser.find_elements("xpath", "//a[starts-with(@href, 'file:') or starts-with(@href, 'javascript:')]")
    scroll_to(browser, link)
    screenshot(browser, "report-link.png")
    with urllib.request.urlopen(link.get_attribute("href"), timeout=30) as reply:
        assert reply.status == 200 and reply.read().decode() == html  # the report the store holds, whole
    browser.get(link.get_attribute("href"))
    assert browser.find_element("tag name", "h1").text.strip()
    screenshot(browser, "report-page.png")
