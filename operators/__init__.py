"""Fault operators O1-O6: each perturbs its seam exactly once per run and says whether it landed.

The pipeline is never told. Values (what is replaced, the fake texts) come from the task oracle,
which only the harness reads.
"""

from operators.faults import Fault, make_fault

__all__ = ["Fault", "make_fault"]
