"""Imported last by the fork server of `adapters.pool`: adopt the caller's main module, then freeze.

- **Main module.** A child of a "forkserver" pool re-runs the parent's main script before its
  first task (`multiprocessing.spawn._fixup_main_from_path`) unless its own `__main__` already has
  that file. CPython 3.11's fork server was meant to preload it (`"__main__"` in the preload list)
  but looks for a `main_path` key the preparation data no longer carries, so every child re-ran
  the script: under the Dagster CLI or a benchmark that is Dagster, DuckDB and pyarrow imported
  again, ~2-3 s a run (measured). Here the fork server runs the script once, as the child fixup
  would, and every child forked from it then skips the fixup.
- **Parent death.** The server exits when the command that started it is gone (watched from its
  first import, `adapters.fork_watch`), and every run forked from it dies with it (`adapters.parent_watch`).
- **Warm state.** What every run would otherwise compute again on first use is made here once:
  the gateway's TLS context for 127.0.0.1 upstreams; openai's response models (it defers each
  pydantic schema to its first use, `DEFER_PYDANTIC_BUILD`; ~27 ms of CPU a run, measured) and its
  request-body type hints; the installed packages' plug-in entry points (a scan of every
  distribution's metadata, ~9% of a LangGraph run's CPU, measured with py-spy); the registered
  prompt fields; the preloaded pipelines' source lines (LangGraph reads its nodes' source at compile).
- **GC freeze.** A forked child shares the server's heap copy-on-write; `gc.freeze()` keeps the
  collector from walking (and copying) every preloaded object in each child.
"""

import gc
import json
import linecache
import os
import runpy
import sys
import types

from adapters import prompts
from adapters.gateway.server import loopback_tls
from adapters.pool import MAIN_ENV  # the caller's main script, set before the server starts
from adapters.warm_clients import build_response_models, resolve_request_types
from sabot import plugins

# Only ever imported by the fork server (never by the caller: it would swap the caller's __main__).


def _adopt_main(path: str | None) -> None:
    if not path or getattr(sys.modules["__main__"], "__file__", None) == path:
        return
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(runpy.run_path(path, run_name="__mp_main__"))
    module.__file__ = path
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _read_pipeline_sources() -> None:
    for module in [m for name, m in sys.modules.items() if name.startswith("adapters.") and name.endswith("_pipeline")]:
        linecache.getlines(module.__file__)


_adopt_main(json.loads(os.environ.get(MAIN_ENV) or "{}").get("init_main_from_path"))
build_response_models()
resolve_request_types()
plugins.load_entry_points()
prompts.reviewer_addendum()
_read_pipeline_sources()
loopback_tls()  # every run's gateway shares it (CA bundle loaded once, here, not in each child)
gc.freeze()
