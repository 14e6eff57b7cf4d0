"""The static HTML report: structure from a parse, and what headless Chromium actually draws.

Boards are built from a small constructed set of cell rows under two rulesets that diverge on one
cell, so exactly one scoreboard row has two readings.
"""

import os
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from judges.hard.scoreboard import build_board
from judges.hard.rulesets import load_ruleset
from judges.hard.strict import floor_rules
from judges.hard.tables import HEADLINE_COLUMN, fmt_rate
from judges.report.html import HEADER_COLOUR, HEADER_MIN_HEIGHT, SCOREBOARD_MIN_WIDTH, render_html

CHROMIUM = Path("/usr/bin/chromium")
LABEL = "public corpus, re-scored"
HEADLINE, ALTERNATIVE = "v0.2.0", "v0.2.1"
FRAMEWORKS, CONFIGS, TASKS, OPERATORS, SEEDS = (
    ("crewai", "langgraph"),
    ("default", "guardrail"),
    ("T1", "T2"),
    ("O1", "O2"),
    (1, 2),
)
GROUPS = [f"{fw}/{cfg}" for fw in FRAMEWORKS for cfg in CONFIGS]
DIVERGING = ("crewai", "guardrail", "T1", "O1", 1)  # detected under the headline ruleset only
EXCLUDED = ("langgraph", "default", "T2", "O2", 2)
STRICT_ANCHOR = {
    ("T1", "O1"): "74.1",
    ("T1", "O2"): "review complete",
    ("T2", "O1"): "4800",
    ("T2", "O2"): "checked against",
}
FOOTNOTES = ["Both readings are published wherever the rulesets diverge.", "Escaped: <script>alert(1)</script> & co."]
MISSING = ["harness/runs/wave2/crewai-T1-default-O1-s1.json"]


def cell(i: int, key: tuple, ruleset: str) -> dict:
    fw, cfg, task, op, seed = key
    mapping, anchored = i % 5 == 0, i % 3 == 0
    if key == DIVERGING:
        mapping, anchored = False, ruleset == HEADLINE
    # An anchored cell quotes its injection-only anchor (so the strict floor sees it); some others notice vaguely.
    flags = (
        [f"anomaly: the value {STRICT_ANCHOR[task, op]} looks planted"]
        if anchored
        else ["something looked odd"]
        if i % 4 == 0
        else []
    )
    return {
        "framework": fw,
        "config": cfg,
        "task": task,
        "operator": op,
        "seed": seed,
        "probe": f"{fw}.{cfg}.{task}.s{seed}",
        "status": "excluded" if key == EXCLUDED else "valid",
        "excluded": "BASELINE_FAIL" if key == EXCLUDED else None,
        "mapping": mapping,
        "flags": flags,
        "flags_noticed": bool(flags),
        "flags_anchored": anchored,
        "detected_hard": mapping or anchored,
        "reacted": mapping,
        "recovered": i % 2 == 0,
    }


def rows_for(ruleset: str) -> list[dict]:
    keys = [
        (fw, cfg, t, op, s) for fw in FRAMEWORKS for cfg in CONFIGS for t in TASKS for op in OPERATORS for s in SEEDS
    ]
    return [cell(i, key, ruleset) for i, key in enumerate(keys)]


@pytest.fixture(scope="module")
def boards(registry) -> dict[str, dict]:
    rulesets = {r: load_ruleset(registry, r) for r in (HEADLINE, ALTERNATIVE)}
    floors = {r: floor_rules(rulesets[r], rulesets.values()) for r in rulesets}
    return {
        r: build_board(registry, r, rows_for(r), baselines=[], operators=OPERATORS, floor=floors[r])
        for r in (HEADLINE, ALTERNATIVE)
    }


@pytest.fixture(scope="module")
def page(boards) -> str:
    return render_html("sim_wave", LABEL, boards, HEADLINE, MISSING, FOOTNOTES)


class Tables(HTMLParser):
    """Every <table>: id, caption text, header rows and body rows as lists of cell texts."""

    def __init__(self, text: str):
        super().__init__()
        self.tables, self.svgs, self.footnotes, self.tags = [], 0, [], set()
        self._table = self._row = self._cell = self._caption = self._li = None
        self._part = "head"
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        if tag == "table":
            self._table = {"id": attrs.get("id"), "caption": "", "head": [], "body": []}
            self.tables.append(self._table)
        elif tag == "caption":
            self._caption = []
        elif tag in ("thead", "tbody", "tfoot"):
            self._part = "head" if tag == "thead" else "body"
        elif tag == "tr":
            self._row = []
            self._table[self._part].append(self._row)
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "svg":
            self.svgs += 1
        elif tag == "li" and (attrs.get("id") or "").startswith("fn-"):
            self._li = [attrs["id"]]

    def handle_endtag(self, tag):
        if tag == "caption":
            self._table["caption"] = " ".join("".join(self._caption).split())
            self._caption = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "li" and self._li is not None:
            self.footnotes.append((self._li[0], "".join(self._li[1:]).strip()))
            self._li = None

    def handle_data(self, data):
        for sink in (self._caption, self._cell, self._li):
            if sink is not None:
                sink.append(data)

    def table(self, table_id: str) -> dict:
        [found] = [t for t in self.tables if t["id"] == table_id]
        return found


def headline_rate(board: dict, group: str) -> str:
    [entry] = [e for e in board["tables"]["framework_config"] if e["group"] == group]
    return fmt_rate(entry["counts"]["detected_hard"], entry["valid"])


def test_every_table_caption_carries_the_label(page):
    tables = Tables(page).tables
    assert (
        len(tables) >= 9
    )  # scoreboard, funnels, readings, median, operator, task x operator, floor, base rates, exclusions
    for t in tables:
        assert t["caption"].startswith(LABEL), t


def test_scoreboard_has_one_row_per_group(page, boards):
    scoreboard = Tables(page).table("scoreboard")
    assert [row[0] for row in scoreboard["body"]] == GROUPS
    headers = scoreboard["head"][0]
    # The clean-baseline base rates sit right after the anchored-text rate.
    anchored = headers.index("flags anchored")
    assert headers[anchored + 1].startswith("clean base rate, registered anchors")
    assert headers[anchored + 2].startswith("clean base rate, strict anchors")
    union = headers.index(HEADLINE_COLUMN)
    for row in scoreboard["body"]:
        assert row[union] == headline_rate(boards[HEADLINE], row[0])


def test_readings_list_both_rulesets_for_the_diverging_row(page, boards):
    readings = Tables(page).table("readings-table")
    heads = readings["head"][0][2:]
    assert [h.split("registered")[0] for h in heads] == [
        f"{HEADLINE} (headline)",
        f"{ALTERNATIVE} (alternative reading)",
    ]
    assert heads[1].endswith("registered 2026-07-25, after the wave-2 data were public (2026-07-24)")  # v0.2.1's date
    scoreboard_rows = [row for row in readings["body"] if row[0].startswith("Scoreboard")]
    assert [row[1] for row in scoreboard_rows] == ["crewai/guardrail"]
    [row] = scoreboard_rows
    assert row[2:] == [
        headline_rate(boards[HEADLINE], "crewai/guardrail"),
        headline_rate(boards[ALTERNATIVE], "crewai/guardrail"),
    ]
    assert row[2] != row[3]
    groups = {(r[0], r[1]) for r in readings["body"]}
    assert ("By operator", "crewai/O1") in groups and ("By task x operator", "crewai/guardrail/T1/O1") in groups


def test_funnels_floor_appendix_footnotes_and_missing(page, boards):
    parsed = Tables(page)
    assert parsed.svgs == len(GROUPS)  # one funnel chart per scoreboard row
    funnels = [t for t in parsed.tables if t["caption"].startswith(f"{LABEL} Funnel")][0]
    [crewai_guardrail] = [row for row in funnels["body"] if row[0] == "crewai/guardrail"]
    assert "valid" in crewai_guardrail[1] and headline_rate(boards[HEADLINE], "crewai/guardrail") in crewai_guardrail[1]
    floor = parsed.table("strict-table")
    assert floor["head"][0][2:4] == ["strict floor", f"{HEADLINE_COLUMN} (published)"]
    assert [row[0] for row in floor["body"]] == GROUPS
    assert parsed.table("exclusions-table")["body"] == [["langgraph", "default", "T2", "O2", "BASELINE_FAIL", "1"]]
    # No baselines here: every base rate is an honest n/a, never a 0%.
    assert parsed.table("base-rates-operator")["body"] == [[op, "n/a (0/0)", "n/a (0/0)"] for op in OPERATORS]
    assert parsed.footnotes == [("fn-1", FOOTNOTES[0]), ("fn-2", FOOTNOTES[1])]
    assert MISSING[0] in page


def test_page_is_self_contained_and_escaped(page):
    parsed = Tables(page)
    assert not parsed.tags & {"script", "link", "img", "iframe", "object", "embed"}
    assert "http://" not in page and "https://" not in page and "url(" not in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_headline_must_have_a_board(boards):
    with pytest.raises(ValueError):
        render_html("sim_wave", LABEL, boards, "v9.9.9", [], [])


def chromium(*args: str, cwd: Path) -> str:
    """Run headless Chromium to completion (60 s cap); its stdout. The whole process group dies on a timeout."""
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={cwd / 'profile'}",
        "--hide-scrollbars",
        "--window-size=1280,1600",
        *args,
    ]
    proc = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("chromium did not finish within 60 s")
    assert proc.returncode == 0, err[-2000:]
    return out


def colour_mask(image: Image.Image, colour: str, tolerance: int = 8) -> Image.Image:
    """255 where every channel is within `tolerance` of `colour`, else 0."""
    solid = Image.new("RGB", image.size, colour)
    bands = [b.point(lambda v: 255 if v <= tolerance else 0) for b in ImageChops.difference(image, solid).split()]
    return ImageChops.darker(ImageChops.darker(bands[0], bands[1]), bands[2])


def test_chromium_renders_the_scoreboard(page, boards, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("chromium not installed (scripts/install_chromium.sh)")
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", report.as_uri(), cwd=tmp_path)

    # (a) The DOM Chromium built holds the scoreboard, its row labels and a rate string.
    dom = Tables(chromium("--dump-dom", report.as_uri(), cwd=tmp_path))
    scoreboard = dom.table("scoreboard")
    assert [row[0] for row in scoreboard["body"]] == GROUPS
    assert headline_rate(boards[HEADLINE], GROUPS[0]) in scoreboard["body"][0]

    # (b) The pixels: the scoreboard header colour covers a header-sized band, and the page is not blank.
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1600)
    mask = colour_mask(image, HEADER_COLOUR)
    header_pixels = mask.histogram()[255]
    # The header row is at least SCOREBOARD_MIN_WIDTH x HEADER_MIN_HEIGHT px of that colour; allow half for the text.
    assert header_pixels >= SCOREBOARD_MIN_WIDTH * HEADER_MIN_HEIGHT // 2, header_pixels
    left, top, right, bottom = mask.getbbox()
    assert right - left >= SCOREBOARD_MIN_WIDTH and bottom - top >= HEADER_MIN_HEIGHT, (left, top, right, bottom)
    colours = image.getcolors(maxcolors=1 << 24)
    assert len(colours) > 16


class Paragraphs(HTMLParser):
    """The text of every element with an id (notes, sections), whitespace collapsed."""

    def __init__(self, text: str):
        super().__init__()
        self._parts, self._open = {}, []
        self.feed(text)
        self.close()
        self.by_id = {node: " ".join("".join(parts).split()) for node, parts in self._parts.items()}

    def handle_starttag(self, tag, attrs):
        node = dict(attrs).get("id")
        self._open.append((tag, node))
        if node:
            self._parts[node] = []

    def handle_endtag(self, tag):
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        for _, node in self._open:
            if node:
                self._parts[node].append(data)


def test_the_soft_tier_shows_kappa_low_confidence_and_lower_bounds(boards):
    measured = {"n": 171, "kappa": 0.412, "lo": 0.301, "hi": 0.523, "bound": 0.6, "confidence": "low-confidence"}
    page = render_html("sim_wave", LABEL, boards, HEADLINE, MISSING, FOOTNOTES, kappa=measured)
    text = Paragraphs(page).by_id
    assert "Cohen's kappa 0.412 [0.301, 0.523] over 171 double-judged pairs; bound 0.6" in text["soft-reliability"]
    assert "Confidence: low-confidence" in text["soft-reliability"]
    unmeasured = Paragraphs(render_html("sim_wave", LABEL, boards, HEADLINE, MISSING, FOOTNOTES)).by_id[
        "soft-reliability"
    ]
    assert "kappa not measured" in unmeasured and "low-confidence" in unmeasured
    undecided = sum(e["counts"]["undecided"] for e in boards[HEADLINE]["tables"]["framework_config"])
    assert undecided > 0 and f"{undecided} valid cell(s) are undecided" in text["lower-bounds"]
    section2 = Tables(page).table("section2-table")
    headers = section2["head"][0]
    for row in section2["body"]:
        cells = dict(zip(headers, row))
        assert cells["DETECTED_SOFT (not hard)"].startswith("≥") and cells["MISSED"].startswith("≥"), row
        assert not cells["DETECTED_HARD"].startswith("≥")  # the hard tier is decided on every valid cell


def test_the_page_spells_out_base_rate_denominators_and_labels_adjusted_figures(page):
    text = Paragraphs(page).by_id
    # The fixture boards scan no baseline: the sentence still names what the denominator counts.
    assert "not cells: per operator (its baselines) 0 each" in text["base-rate-denominators"]
    assert "pooled 0 baselines x 2 anchor sets = 0" in text["base-rate-denominators"]  # two operators in the fixture
    assert "diagnostic, not a score" in text["strict-floor"]
    assert "registered 2026-07-23" in text["ruleset-registered"]
    uncertainty = Tables(page).table("uncertainty-table")
    assert uncertainty["head"][0][2:] == [
        "Wilson 95%",
        "task-cluster bootstrap 95%",
        "replicate-cluster bootstrap 95% (exact)",
    ]
    assert (
        "replicate-cluster bootstrap" in text["uncertainty"]
        and "Wilson 95%: each cell an independent" in text["uncertainty"]
    )
