"""Imported last by the fork server of `adapters.pool`: adopt the caller's main module, then freeze.

- **Main module.** A child of a "forkserver" pool re-runs the parent's main script before its
  first task (`multiprocessing.spawn._fixup_main_from_path`) unless its own `__main__` already has
  that file. CPython 3.11's fork server was meant to preload it (`"__main__"` in the preload list)
  but looks for a `main_path` key the preparation data no longer carries, so every child re-ran
  the script: under the Dagster CLI or a benchmark that is Dagster, DuckDB and pyarrow imported
  again, ~2-3 s a run (measured). Here the fork server runs the script once, as the child fixup
  would, and every child forked from it then skips the fixup.
- **Parent death.** The server exits when the command that started it is gone, and every run
  forked from it dies with it (`adapters.parent_watch`).
- **Warm state.** The gateway's TLS context for 127.0.0.1 upstreams is made here once, and
  openai's response models are built: openai defers each pydantic schema to its first use
  (`DEFER_PYDANTIC_BUILD`), which every run would otherwise pay again (~27 ms of CPU, measured).
- **GC freeze.** A forked child shares the server's heap copy-on-write; `gc.freeze()` keeps the
  collector from walking (and copying) every preloaded object in each child.
"""

import gc
import json
import os
import runpy
import sys
import types

from openai._models import construct_type
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from adapters.gateway.server import loopback_tls
from adapters.parent_watch import exit_when_parent_dies
from adapters.pool import MAIN_ENV  # the caller's main script, set before the server starts
from adapters.scripted.server import Reply, ToolCall, completion_body, stream_chunks  # the replies' shapes, not the model

# Only ever imported by the fork server (never by the caller: it would swap the caller's __main__).


def _adopt_main(path: str | None) -> None:
    if not path or getattr(sys.modules["__main__"], "__file__", None) == path:
        return
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(runpy.run_path(path, run_name="__mp_main__"))
    module.__file__ = path
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _build_response_models() -> None:
    """Parse one reply with a tool call, whole and streamed, as every run's clients will."""
    reply = Reply("warm", (ToolCall("warm", "{}"),))
    construct_type(type_=ChatCompletion, value=completion_body(0, "warm", {"messages": []}, reply))
    for chunk in stream_chunks(0, "warm", {"messages": []}, reply):
        construct_type(type_=ChatCompletionChunk, value=chunk)


_adopt_main(json.loads(os.environ.get(MAIN_ENV) or "{}").get("init_main_from_path"))
_build_response_models()
loopback_tls()  # every run's gateway shares it (CA bundle loaded once, here, not in each child)
exit_when_parent_dies()  # the command that started the server: killed, it takes the server and its runs with it
gc.freeze()
