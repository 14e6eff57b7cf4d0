"""Benchmark: peak memory of `sabot corpus import` with one large trace, against the file's size.

    .venv/bin/python bench/bench_import_memory.py              # a 60 MB trace (~2 min)
    .venv/bin/python bench/bench_import_memory.py --mb 20 --shape text

The corpus is one block of the public wave-2 reference corpus (LangGraph default, T1: 35 run
files and their verdicts), with one fault run grown to the given size: `events` adds events of
2 KB texts (a long run), `text` puts it all in one event's text (one huge reply). Each import runs
as the command line runs it, in a fresh process with a fresh store and Dagster instance; its peak
resident set (the kernel's ru_maxrss of the child) is printed, and so is that of the same import
with the trace left as it is, so the figure the file adds can be read off. Printed, never asserted.
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
            batch = [{"seq": seq + i + 1, "agent": "scratch", "kind": "note", "payload": {"text": text}} for i in range(2000)]
            events.extend(batch)
            seq += len(batch)
    path.write_text(json.dumps(doc))


def import_peak(corpus: Path, work: Path) -> tuple[int, float]:
    """(peak RSS in bytes, seconds) of one `sabot corpus import` in a fresh process."""
    env = {**os.environ, "SABOT_VAR": str(work), "DAGSTER_HOME": str(ROOT)}
    env.pop("SABOT_DB", None)
    script = ("import resource, subprocess, sys\n"
              "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "sys.stderr.write(done.stderr[-2000:])\n"
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)\n")
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script, str(ROOT / ".venv" / "bin" / "sabot"), "corpus", "import",
                          str(corpus), "--wave", "public_wave2"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    kib, code = out.stdout.split()
    if code != "0":
        raise SystemExit(f"import failed:\n{out.stderr}")
    return int(kib) * 1024, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--shape", choices=("events", "text"), default="events")
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
    mb = 2**20
    print(f"trace: {size / mb:.1f} MB ({args.shape}); the rest of the block as published")
    print(f"import without the large trace: peak RSS {base / mb:.0f} MB ({base_s:.1f} s)")
    print(f"import with it:                 peak RSS {peak / mb:.0f} MB ({peak_s:.1f} s)")
    print(f"added by the trace: {(peak - base) / mb:.0f} MB = {(peak - base) / size:.2f} x the file "
          f"(whole process: {peak / size:.2f} x; target: under 4 x the file)")


if __name__ == "__main__":
    main()
