"""Reading a corpus file as a JSON stream: a run record's events one at a time, never all at once.

`read_document` builds a file's object from ijson's parse events, except the items of a run
record's `trace.events`, which are handed to a callback as each one completes and then let go: a
60 MB trace costs one event's objects, not sixty megabytes of them. The same pass hashes the bytes
it parsed, so what was validated is exactly what the hash names.

Two things the C parser hides are checked beside it: a lone surrogate escape (`"\\ud800"`, valid
JSON, not text; yajl replaces it with `?`) is found in the raw bytes, and then named by field in a
second, pure-Python pass; nesting deeper than `MAX_DEPTH` is refused (ijson's prefixes grow with
depth, and every later `json.loads` would recurse that deep).
"""

import hashlib
import re

import ijson

MAX_DEPTH = 500
CHUNK = 1 << 22  # yajl rescans a token cut across reads from its start: small reads make one long text quadratic
# A \\uD800-\\uDFFF escape whose backslash is itself unescaped: the run of backslashes before it is even.
SURROGATE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u[dD]([89a-fA-F])[0-9a-fA-F]{2}")
ESCAPE_MAX = 6  # bytes of one \\uXXXX escape


class StreamError(ValueError):
    """A document that cannot be read; `where` is the field path ('' for the document itself)."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where, self.problem = where, problem


class _LoneSurrogates:
    """Finds lone surrogate escapes in a byte stream fed in chunks (a pair high+low is text)."""

    def __init__(self):
        self.carry, self.offset, self.high_end, self.found = b"", 0, None, False

    def feed(self, chunk: bytes, final: bool = False) -> None:
        data = self.carry + chunk
        stop = len(data)
        cut = data.find(b"\\", max(0, len(data) - ESCAPE_MAX + 1))
        if not final and cut >= 0:  # an escape may be cut in two: keep it, from the start of its backslash run
            stop = cut
            while stop > 0 and data[stop - 1 : stop] == b"\\":
                stop -= 1
        for m in SURROGATE.finditer(data, 0, stop):
            start = self.offset + m.start() + len(m.group(1))
            low = m.group(2) in b"cdefCDEF"
            if low and self.high_end == start:
                self.high_end = None
                continue
            if self.high_end is not None or low:
                self.found = True
            self.high_end = None if low else self.offset + m.end()
        self.carry, self.offset = data[stop:], self.offset + stop
        if final and self.high_end is not None:
            self.found = True


class _HashingReader:
    """A binary file as ijson reads it, hashed and searched for lone surrogates on the way."""

    def __init__(self, fp):
        self.fp, self.sha = fp, hashlib.sha256()
        self.surrogates = _LoneSurrogates()

    def read(self, n: int = -1) -> bytes:
        if n == 0:  # ijson's probe for bytes or text
            return b""
        chunk = self.fp.read(n)
        self.sha.update(chunk)
        self.surrogates.feed(chunk, final=not chunk)
        return chunk


def _label(path: list) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Builder:
    """Objects from basic_parse events; items of the array at `stream_at` go to `on_item` instead."""

    def __init__(self, stream_at: tuple, on_item, check_text: bool):
        self.stack: list = []  # [container, path, key awaiting a value, streamed?]
        self.root = None
        self.stream_at, self.on_item, self.check_text = stream_at, on_item, check_text

    def _path(self) -> list:
        if not self.stack:
            return []
        container, path, key, streamed = self.stack[-1]
        if isinstance(container, dict):
            return [*path, key]
        return [*path, len(container) if streamed is False else streamed]

    def _add(self, value) -> None:
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        container, _, key, streamed = frame
        if isinstance(container, dict):
            container[key] = value
        elif streamed is not False:
            self.on_item(frame[3], value)
            frame[3] += 1
        else:
            container.append(value)

    def event(self, kind: str, value) -> None:
        if kind == "map_key":
            container, path, _, _ = self.stack[-1]
            if self.check_text:
                _require_text(value, _label(path) + " (a key)" if path else "a key")
            if value in container:
                raise StreamError(_label(path), f"the key {value!r} twice; one would win silently")
            self.stack[-1][2] = value
        elif kind in ("start_map", "start_array"):
            path = self._path()
            if len(self.stack) >= MAX_DEPTH:
                raise StreamError("", f"nested deeper than {MAX_DEPTH} levels")
            streamed = kind == "start_array" and tuple(path) == self.stream_at
            self.stack.append([{} if kind == "start_map" else [], path, None, 0 if streamed else False])
        elif kind in ("end_map", "end_array"):
            container, _, _, streamed = self.stack.pop()
            self._add([] if streamed is not False else container)
        else:
            if self.check_text and kind == "string":
                _require_text(value, _label(self._path()))
            self._add(value)


def _require_text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StreamError(
            where,
            f"a lone surrogate ({value[exc.start]!r}) at character {exc.start} is not text; the store holds UTF-8 only",
        ) from None


def _first_line(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return text.strip().splitlines()[0]


def _build(events, stream_at: tuple, on_item, check_text: bool):
    builder = _Builder(stream_at, on_item, check_text)
    for kind, value in events:
        builder.event(kind, value)
    return builder.root


def stream_document(fp, stream_at: tuple = (), on_item=None) -> tuple[object, str, bool]:
    """(the document, sha256 of its bytes, whether it holds a lone surrogate escape) from a binary
    file; the array at `stream_at` (a path of keys, e.g. ("trace", "events")) is left empty, each of
    its items passed to `on_item(index, item)` instead."""
    reader = _HashingReader(fp)
    try:
        doc = _build(ijson.basic_parse(reader, buf_size=CHUNK, use_float=True), stream_at, on_item or _drop, False)
    except ijson.JSONError as exc:
        raise StreamError("", f"not valid JSON ({_first_line(exc)})") from None
    while reader.read(CHUNK):  # the rest of the file (none once parsed): the hash is the whole file's
        pass
    return doc, reader.sha.hexdigest(), reader.surrogates.found


def read_document(path, stream_at: tuple = (), on_item=None) -> tuple[object, str]:
    """`stream_document` over a file, refusing text the store cannot hold, by field."""
    with open(path, "rb") as fp:
        doc, sha256, lone_surrogate = stream_document(fp, stream_at, on_item)
    if lone_surrogate:
        with open(path, "rb") as fp:  # yajl printed it as '?': the pure-Python parser keeps it, to name its field
            _build(ijson.get_backend("python").basic_parse(fp, use_float=True), stream_at, _drop, True)
    return doc, sha256


def _drop(index, item) -> None:
    pass
