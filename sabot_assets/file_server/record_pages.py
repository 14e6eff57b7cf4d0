"""A sealed run record as pages a reader can follow: the overview with its seal, the events, the
model exchanges one by one, and the raw sealed files.

Rendered from the attempt's own files under the run root, after checking them against their seal
(`sabot.runroot.read_attempt`): a page says whether what it shows is the sealed evidence. The
scripted model's intent log is never shown: it is the simulator's ground truth, not the run's record.
"""

import html
import json
from pathlib import Path

from sabot import runroot
from sabot.seal import SEAL_FILE, SealError
from sabot.trace import TraceError

RAW_FILES = ("runresult.json", "baseline-runresult.json", runroot.META_FILE, SEAL_FILE)  # never intent.json
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;vertical-align:top;text-align:left}"
    "pre{white-space:pre-wrap;margin:0;font-size:.9em}.bad{color:#b00020;font-weight:bold}.ok{color:#0a6e31}"
    ".planted{background:#fff3cd}nav a{margin-right:1em}"
)


def page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _text(value) -> str:
    if isinstance(value, str):
        return f"<pre>{html.escape(value)}</pre>"
    return f"<pre>{html.escape(json.dumps(value, ensure_ascii=False, indent=1))}</pre>"


def _table(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


class RecordPages:
    """The pages of one attempt directory (relative to the run root)."""

    def __init__(self, run_root: Path, relative: str):
        self.run_root = Path(run_root)
        self.relative = relative.strip("/")
        self.directory = (self.run_root / self.relative).resolve()
        if self.run_root.resolve() not in self.directory.parents or not (self.directory / runroot.META_FILE).is_file():
            raise FileNotFoundError(f"no finished attempt at runs/{self.relative}")
        try:
            attempt = runroot.read_attempt(self.run_root, self.directory)
            self.seal = f"<p class='ok'>Sealed: every file below matches its seal under this store's key ({len(self._sealed_files())} files).</p>"
            self.operator = attempt.operator
        except (SealError, TraceError) as exc:
            self.seal = f"<p class='bad'>Not evidence: {html.escape(str(exc))}</p>"
            self.operator = None if "/baseline/" in f"/{self.relative}/" else self.relative.split("/")[4]
        self.meta = json.loads((self.directory / runroot.META_FILE).read_text())
        self.doc = json.loads((self.directory / runroot.run_file_name(self.operator)).read_text())

    def _sealed_files(self) -> list[str]:
        return sorted(json.loads((self.directory / SEAL_FILE).read_text())["files"])

    @property
    def cell(self) -> str:
        t = self.doc["trace"]
        probe = f"{t['framework']}.{t['config']}.{t['task']}.s{t['seed']}"
        return f"{t['operator']}|{probe}" if t.get("operator") else f"baseline {probe}"

    def _title(self, what: str) -> str:
        return f"{what}: {self.meta.get('wave', '')} {self.cell}, attempt {self.relative.rsplit('-', 1)[-1]}"

    def _nav(self) -> str:
        base = f"/runs/{self.relative}"
        links = [
            (f"{base}/", "record"),
            (f"{base}/events", f"events ({len(self.doc['trace']['events'])})"),
            (f"{base}/exchanges", f"model exchanges ({len(self.doc.get('exchanges', []))})"),
        ]
        links += [(f"{base}/raw/{name}", f"raw {name}") for name in RAW_FILES if (self.directory / name).is_file()]
        return (
            "<nav>"
            + "".join(f"<a href='{html.escape(href)}'>{html.escape(label)}</a>" for href, label in links)
            + "</nav>"
        )

    def overview(self) -> str:
        d, m = self.doc, self.meta
        rows = [
            ("cell", html.escape(self.cell)),
            ("outcome", html.escape(m.get("outcome", "?"))),
            ("error", _text(d["error"]) if d.get("error") else "none"),
            ("task passed", "yes" if d.get("task_passed") else "no"),
            (
                "fault planted at event",
                html.escape(str(d.get("injection_seq"))) + (" (verified)" if d.get("injection_verified") else ""),
            ),
            ("run id", html.escape(d["trace"]["run_id"])),
            ("Dagster run", html.escape(m.get("dagster_run_id", ""))),
            ("started / finished", html.escape(f"{m.get('started_at', '')} / {m.get('finished_at', '')}")),
        ]
        rows += [(k.replace("_", " "), html.escape(str(v))) for k, v in sorted(m.get("identity", {}).items())]
        usage = d.get("usage") or {}
        rows += [
            (f"usage {k.replace('_', ' ')}", html.escape(str(v)))
            for k, v in sorted(usage.items())
            if isinstance(v, (int, float))
        ]
        return page(self._title("Run record"), self._nav() + self.seal + _table(rows) + self._other_attempts())

    def _other_attempts(self) -> str:
        """The cell's other finished attempts, each linked to its model exchanges: a run killed in flight
        or cut off while looping kept every call it was answered, and those calls say why it never finished."""
        rows = []
        for other in sorted(self.directory.parent.glob("attempt-*"), key=lambda d: int(d.name.rsplit("-", 1)[-1])):
            meta_file = other / runroot.META_FILE
            if other == self.directory or not meta_file.is_file():
                continue
            try:
                meta, doc = (
                    json.loads(meta_file.read_text()),
                    json.loads((other / runroot.run_file_name(self.operator)).read_text()),
                )
            except (OSError, ValueError) as exc:  # its own pages say what is wrong with it
                meta, doc = {"outcome": "unreadable"}, {"error": str(exc)}
            href = f"/runs/{self.relative.rsplit('/', 1)[0]}/{other.name}/exchanges"
            rows.append(
                f"<tr><td>{html.escape(other.name)}</td><td>{html.escape(meta.get('outcome', '?'))}</td>"
                f"<td>{html.escape(doc.get('error') or '')}</td>"
                f"<td><a href='{html.escape(href)}'>model exchanges ({len(doc.get('exchanges', []))})</a></td></tr>"
            )
        if not rows:
            return ""
        return (
            "<h2>Other attempts of this cell</h2><table><thead><tr><th>attempt</th><th>outcome</th><th>error</th><th>calls</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"
        )

    def events(self) -> str:
        planted = self.doc.get("injection_seq")
        rows = "".join(
            f"<tr id='seq-{e['seq']}'{' class=planted' if e['seq'] == planted else ''}><td>{e['seq']}</td><td>{html.escape(e['agent'])}</td>"
            f"<td>{html.escape(e['kind'])}</td><td>{self._payload(e['payload'])}</td></tr>"
            for e in self.doc["trace"]["events"]
        )
        note = f"<p>The fault was planted at event {planted} (highlighted).</p>" if planted is not None else ""
        return page(
            self._title("Events"),
            self._nav()
            + self.seal
            + note
            + f"<table><thead><tr><th>seq</th><th>agent</th><th>kind</th><th>payload</th></tr></thead><tbody>{rows}</tbody></table>",
        )

    @staticmethod
    def _payload(payload: dict) -> str:
        return _table([(k, _text(v)) for k, v in payload.items()])

    def exchanges(self) -> str:
        found = self.doc.get("exchanges", [])
        items = "".join(
            f"<li><a href='/runs/{html.escape(self.relative)}/exchanges/{x.get('n', i + 1)}'>exchange {x.get('n', i + 1)}</a>: "
            f"{html.escape(str(x.get('model') or 'no model'))}, {html.escape(self._reply_line(x))}</li>"
            for i, x in enumerate(found)
        )
        body = f"<ol>{items}</ol>" if found else "<p>No model exchanges recorded (an imported corpus carries none).</p>"
        return page(self._title("Model exchanges"), self._nav() + self.seal + body)

    @staticmethod
    def _reply_line(exchange: dict) -> str:
        reply = exchange.get("reply") or {}
        if "error" in reply:
            return f"error: {reply['error'].get('message', reply['error']) if isinstance(reply['error'], dict) else reply['error']}"
        content = ((reply.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        return f"reply of {len(content)} characters"

    def exchange(self, n: int) -> str:
        found = [x for i, x in enumerate(self.doc.get("exchanges", [])) if x.get("n", i + 1) == n]
        if not found:
            raise FileNotFoundError(f"runs/{self.relative} has no model exchange {n}")
        x = found[0]
        rows = [
            ("model", html.escape(str(x.get("model")))),
            ("call", html.escape(f"{x.get('method', '')} {x.get('path', '')}")),
            ("status", html.escape(str(x.get("status")))),
            ("seconds", html.escape(str(x.get("seconds")))),
        ]
        if x.get("error"):
            rows.append(("error", _text(x["error"])))
        messages = "".join(
            f"<tr><th>{html.escape(str(msg.get('role')))}</th><td>{_text(msg.get('content'))}</td></tr>"
            for msg in (x.get("request") or {}).get("messages", [])
        )
        reply = x.get("reply") or {}
        answer = ((reply.get("choices") or [{}])[0].get("message") or {}).get("content")
        return page(
            self._title(f"Model exchange {n}"),
            self._nav()
            + self.seal
            + _table(rows)
            + f"<h2>Request</h2><table>{messages}</table>"
            + "<h2>Reply</h2>"
            + (_text(answer) if answer is not None else _text(reply)),
        )

    def raw(self, name: str) -> bytes:
        if name not in RAW_FILES or not (self.directory / name).is_file():
            raise FileNotFoundError(
                f"runs/{self.relative} serves no raw file {name!r} (served: {', '.join(RAW_FILES)})"
            )
        return (self.directory / name).read_bytes()
