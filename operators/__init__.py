"""Fault operators O1-O6: each perturbs its seam exactly once per run and says whether it landed.

The pipeline is never told. Values (what is replaced, the fake texts) come from the task oracle,
which only the harness reads. Every module of this package is imported here, so an operator
registered in a module of its own (`@plugins.register("operator", "O7")`) needs no other edit.
"""

import importlib
import pkgutil

from operators.faults import Fault, make_fault

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Fault", "make_fault"]
