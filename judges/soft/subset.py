"""The pre-registered double-judged subset: a fixed 20% of cells, by cell key alone."""

import hashlib

SUBSET_DOC = "standard/kappa_subset.v1.json"


def double_judged(wave: str, operator: str, probe: str) -> bool:
    digest = hashlib.sha256(f"{wave}|{operator}|{probe}".encode()).hexdigest()
    return int(digest[:8], 16) % 5 == 0
