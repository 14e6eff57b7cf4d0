"""Benchmark: peak memory of `sabot corpus import` with one large trace, against the file's size.

    .venv/bin/python bench/bench_import_memory.py              # a 60 MB trace (~30 s)
    .venv/bin/python bench/bench_import_memory.py --mb 20 --shape text

The corpus is one block of the public wave-2 reference corpus (LangGraph default, T1: 35 run
files and their verdicts), with one fault run grown to the given size: `events` adds events of
2 KB texts (a long run), `text` puts it all in one event's text (one huge reply). Each import runs
as the command line runs it, in a fresh process with a fresh store and Dagster instance; its peak
resident set (the kernel's ru_maxrss of the child) is printed, and so is that of the same import
with the trace left as it is, so the figure the file adds can be read off. Printed, never asserted.

`--phases` also runs the large import's steps one by one in a fresh process (the scan, the landing
transaction, the run assets), resetting the kernel's peak-RSS mark (`/proc/self/clear_refs`) before
each, and prints each step's peak above what the process held when it began.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "external" / "sabot-public"
BLOCK = "harness/runs/wave2/langgraph/default/T1"
GROWN = f"{BLOCK}/O1/seed11/runresult.json"


def grow(path: Path, size: int, shape: str) -> None:
    """Grow a valid trace to about `size` bytes without changing what the scorer reads of it."""
    doc = json.loads(path.read_text())
    events = doc["trace"]["events"]
    if shape == "text":
        events[-1]["payload"]["padding"] = "x" * (size - path.stat().st_size)
    else:
        seq = max(e["seq"] for e in events)
        text = "Reviewed the figures line by line; nothing further to add. " * 34  # ~2 KB
        while len(json.dumps(doc)) < size:  # cheap enough: a few hundred dumps of a growing list
            batch = [
                {"seq": seq + i + 1, "agent": "scratch", "kind": "note", "payload": {"text": text}} for i in range(2000)
            ]
            events.extend(batch)
            seq += len(batch)
    path.write_text(json.dumps(doc))


def import_peak(corpus: Path, work: Path) -> tuple[int, float]:
    """(peak RSS in bytes, seconds) of one `sabot corpus import` in a fresh process."""
    env = {**os.environ, "SABOT_VAR": str(work), "DAGSTER_HOME": str(ROOT)}
    env.pop("SABOT_DB", None)
    script = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(done.stderr[-2000:])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)\n"
    )
    started = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(ROOT / ".venv" / "bin" / "sabot"),
            "corpus",
            "import",
            str(corpus),
            "--wave",
            "public_wave2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    kib, code = out.stdout.split()
    if code != "0":
        raise SystemExit(f"import failed:\n{out.stderr}")
    return int(kib) * 1024, time.perf_counter() - started


PHASE_SCRIPT = """
import re, sys, time
from pathlib import Path

def rss(field):
    return int(re.search(field + r":\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024

def phase(name, fn):
    Path("/proc/self/clear_refs").write_text("5")  # the peak mark restarts at the current RSS
    start, t = rss("VmRSS"), time.perf_counter()
    out = fn()
    print("PHASE", name, start, rss("VmHWM"), round(time.perf_counter() - t, 2), flush=True)
    return out

import dagster as dg
from dagster_duckdb import DuckDBResource
from sabot.corpus import LIMITS, scan
from sabot.registry import Registry
from sabot.store.db import connect
from sabot.store.landing import write_import
from sabot_assets.definitions import build_definitions
from sabot_assets.materialize import WaveRunner, blocks

corpus, store = Path(sys.argv[1]), Path(sys.argv[2])
registry = Registry()
wave = registry.wave("public_wave2")
with dg.DagsterInstance.get() as instance:
    defs = build_definitions(registry, DuckDBResource(database=str(store)))
    found = phase("scan", lambda: scan(wave, corpus, registry.field(LIMITS, "max_file_bytes")))
    def land():
        with connect(store) as con:
            write_import(con, found, registry.content_hash)
    phase("landing", land)
    runner = WaveRunner(defs, wave, instance)
    phase("pre-registration", runner.preregister)
    spans = blocks(wave, {(f.probe.framework, f.probe.config, f.probe.task) for f in found.files})
    phase("run assets", lambda: [runner.runs(b) for b in spans])
"""


def phases(corpus: Path, work: Path) -> list[tuple[str, int, int, float]]:
    """(step, RSS when it began, its peak RSS, seconds) for each step of one import, in a fresh process."""
    work.mkdir()
    env = {
        **os.environ,
        "SABOT_VAR": str(work),
        "DAGSTER_HOME": str(ROOT),
        "SABOT_DAGSTER_STORAGE": str(work / "dagster"),
    }
    out = subprocess.run(
        [sys.executable, "-c", PHASE_SCRIPT, str(corpus), str(work / "sabot.duckdb")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"phased import failed:\n{out.stderr[-3000:]}")
    rows = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("PHASE ")]
    return [(" ".join(r[:-3]), int(r[-3]), int(r[-2]), float(r[-1])) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--shape", choices=("events", "text"), default="events")
    parser.add_argument("--phases", action="store_true", help="also the peak RSS of each step of the large import")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sabot-bench-import-") as tmp:
        tmp = Path(tmp)
        plain, large = tmp / "plain", tmp / "large"
        shutil.copytree(CORPUS / BLOCK, plain / BLOCK)
        shutil.copytree(plain, large)
        grow(large / GROWN, int(args.mb * 2**20), args.shape)
        size = (large / GROWN).stat().st_size
        base, base_s = import_peak(plain, tmp / "var-plain")
        peak, peak_s = import_peak(large, tmp / "var-large")
        steps = phases(large, tmp / "var-phases") if args.phases else []
    mb = 2**20
    print(f"trace: {size / mb:.1f} MB ({args.shape}); the rest of the block as published")
    print(f"import without the large trace: peak RSS {base / mb:.0f} MB ({base_s:.1f} s)")
    print(f"import with it:                 peak RSS {peak / mb:.0f} MB ({peak_s:.1f} s)")
    print(
        f"added by the trace: {(peak - base) / mb:.0f} MB = {(peak - base) / size:.2f} x the file "
        f"(whole process: {peak / size:.2f} x; target: under 4 x the file)"
    )
    for name, start, top, seconds in steps:
        print(
            f"  {name:<17} peak RSS {top / mb:5.0f} MB, {(top - start) / mb:4.0f} MB above its start = {(top - start) / size:.2f} x the file ({seconds:.1f} s)"
        )


if __name__ == "__main__":
    main()
