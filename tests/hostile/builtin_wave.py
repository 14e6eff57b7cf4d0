"""`sabot wave run ...` with the standard's LangGraph pipeline replaced by a hostile one.

Run as a script by tests/test_confinement_builtin.py. The replacement is registered at import, so
it holds in this command and in its fork server too (which runs the command's main script once,
adapters/fork_ready.py): every LangGraph run of the wave runs tests/hostile/hostile_builtin.py,
through the same pool, fork server and confined server as any built-in row.
"""

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]

import adapters.runner  # noqa: E402,F401  (the standard's registrations first: this one replaces LangGraph's)
from sabot import plugins  # noqa: E402

plugins.register("pipeline", "langgraph", "hostile_builtin:HostileLangGraph", replace=True)

if __name__ == "__main__":
    from sabot_assets.cli import main

    sys.argv[0] = "sabot"
    main()
