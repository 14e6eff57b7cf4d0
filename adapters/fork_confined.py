"""Imported by the fork server of `adapters.pool`, right after its watch: start the confined server.

Every built-in row's pipeline runs in a child of that server, inside the sandbox
(`adapters.confined_server`); started here, it is started once per command, its framework imports
overlap the harness's own, and every run forked from this fork server knows where to reach it.
It dies with this fork server (bwrap's `--die-with-parent`), which dies with the command.
"""

import json
import os

from adapters.confinement import ConfinementUnavailable
from adapters.confined_server import CONFINED_PRELOAD_ENV, start

try:
    start(json.loads(os.environ.get(CONFINED_PRELOAD_ENV) or "[]"))
except ConfinementUnavailable:
    pass  # no bubblewrap: each run asks again and fails naming the missing tool, never runs unconfined
