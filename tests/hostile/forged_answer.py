"""A team pipeline's process that forges its answer: a pickle whose loading runs code in whoever loads it.

Written straight to the answer channel (the pipe the confined interpreter was handed, its second
argument), as any code in that process could. Unpickled by the harness, it would create `target`
there, outside the sandbox, in the process that holds the seal key.
"""

import os
import pickle
import sys


class Planted:
    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return exec, (f"open({self.target!r}, 'w').write('ran in the process that unpickled it')",)


def forge(target: str, then: str = "exit"):
    """The forged answer on the channel; then end before the real one (`exit`) or answer too (`return`)."""
    os.write(int(sys.argv[2]), pickle.dumps(("ok", Planted(str(target)))))
    if then == "exit":
        os._exit(0)
    return {"answered": "after the forgery"}
