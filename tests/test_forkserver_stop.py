"""CPython's private fork-server stop, the one the harness uses (adapters/forkserver_stop.py): a Python
release that renames or changes it fails here by name, not as a fork server left running.

The check runs in a new interpreter: a test worker that ran a wave earlier holds the harness's fork
server settings (its preloads, which start a confined server, and the environment they read), and a
plain server started under them could hang this check for reasons that are not the stop's."""

import os
import subprocess
import sys
import textwrap

HARNESS_ENV = ("SABOT_FORK_MAIN", "SABOT_FORK_STARTER", "SABOT_CONFINED_PRELOAD")  # set by adapters.pool

CHECK = textwrap.dedent(
    """
    import multiprocessing, os, time
    from multiprocessing import forkserver

    from adapters.forkserver_stop import stop_forkserver


    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().split()[2] != "Z"  # a zombie has ended; only its parent's reaping is left
        except FileNotFoundError:
            return False


    def server_pid():
        return forkserver._forkserver._forkserver_pid  # read only here, to see which process the stop ended


    if __name__ == "__main__":
        context = multiprocessing.get_context("forkserver")
        with context.Pool(1) as pool:
            assert pool.apply(os.getpid) > 0
        first = server_pid()
        assert first is not None and alive(first), "no fork server running after a pool"
        stop_forkserver()
        deadline = time.monotonic() + 10
        while alive(first) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(first), "the fork server outlived the stop"
        with context.Pool(1) as pool:  # the next pool starts a new server
            assert pool.apply(os.getpid) > 0
        assert server_pid() not in (None, first), "the next pool did not start a new server"
        stop_forkserver()
        print("ok")
    """
)


def test_stop_ends_the_running_fork_server_and_it_starts_again(tmp_path):
    script = tmp_path / "check_forkserver_stop.py"
    script.write_text(CHECK)
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
