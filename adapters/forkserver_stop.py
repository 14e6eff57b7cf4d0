"""The one private CPython call the harness makes: stopping multiprocessing's fork server.

`multiprocessing.forkserver` has a public `ensure_running()` but no public stop; CPython's own
tests stop it with `forkserver._forkserver._stop()`. The harness needs it to restart the server
with more pipelines preloaded, and to stop it between waves. Kept here alone, pinned by
`tests/test_forkserver_stop.py`, so a Python release that renames it fails by name.
"""

from multiprocessing import forkserver


def stop_forkserver() -> None:
    """Stop this process's fork server (it starts again on the next `ensure_running`)."""
    forkserver._forkserver._stop()
