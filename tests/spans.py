"""The Dagster UI's partition span text, read back: what keys a link's `*_range` selects."""

import json
import re

KEY = r'"(?:[^"\\]|\\.)*"|[-a-zA-Z0-9_:/@]+'


def span_keys(span: str, ordered: list[str]) -> list[str]:
    """Quoted or bare keys and `[first...last]` runs (in `ordered`), comma-separated."""
    unquote = lambda k: json.loads(k) if k.startswith('"') else k  # noqa: E731  (the grammar's escapes are JSON's)
    out = []
    for first, last, single in re.findall(rf"\[({KEY})\.\.\.({KEY})\]|({KEY})", span):
        if single:
            out.append(unquote(single))
        else:
            i, j = ordered.index(unquote(first)), ordered.index(unquote(last))
            out += ordered[i : j + 1]
    return out
