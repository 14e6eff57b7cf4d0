"""The §6 double-judged subset rule (data/standard/kappa_subset.v1.json): a fixed 20% by cell key alone."""

import hashlib
import re

from judges.soft.subset import SUBSET_DOC, double_judged
from judges.stats.coverage import matrix_cells
from sabot.matrix import Cell, Probe


def registered_rule(doc):
    """The modulus the registered rule text names, read from the data, not from the code."""
    (modulus,) = re.findall(r"% (\d+) == 0", doc["rule"])
    return int(modulus)


def by_rule_text(wave, operator, probe, modulus):
    return int(hashlib.sha256(f"{wave}|{operator}|{probe}".encode()).hexdigest()[:8], 16) % modulus == 0


def wave_cells(registry, name):
    wave = registry.wave(name)
    return [Cell(op, Probe(f, c, t, s)) for f, c, t, op, s in wave.cell_keys()]


def test_the_registered_fraction_and_rule_text_agree():
    # 0.2 of the cells: one residue class of five.
    from sabot.registry import Registry

    doc = Registry().doc(SUBSET_DOC)
    assert doc["fraction"] == 0.2 and registered_rule(doc) == 5


def test_the_code_selects_exactly_the_cells_the_registered_rule_names(registry):
    modulus = registered_rule(registry.doc(SUBSET_DOC))
    for name in ("public_wave2", "wave2", "public_wave1"):
        for cell in wave_cells(registry, name):
            assert double_judged(name, cell.operator, cell.probe.key) == by_rule_text(
                name, cell.operator, cell.probe.key, modulus
            ), (name, cell.key)


def test_wave2_double_judges_171_of_its_825_scored_cells(registry):
    cells = wave_cells(registry, "wave2")
    assert len(cells) == 825  # 900 cells minus the 75 carved out (§10.6)
    picked = [c for c in cells if double_judged("wave2", c.operator, c.probe.key)]
    assert len(picked) == 171  # 20.7%: a hash rule gives about, not exactly, a fifth
    assert abs(len(picked) / len(cells) - 0.2) < 0.02


def test_the_subset_is_fixed_by_the_key_alone_and_differs_between_waves():
    keys = matrix_cells(("langgraph",), ("default",), ("T1", "T2"), ("O1", "O2", "O3"), (11, 12, 13))
    first = [double_judged("wave2", op, f"{f}.{c}.{t}.s{s}") for f, c, t, op, s in keys]
    assert first == [double_judged("wave2", op, f"{f}.{c}.{t}.s{s}") for f, c, t, op, s in keys]  # no state, no RNG
    other = [double_judged("public_wave2", op, f"{f}.{c}.{t}.s{s}") for f, c, t, op, s in keys]
    assert first != other  # the wave name is part of the key
