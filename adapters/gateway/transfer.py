"""One upstream attempt on the wire: the first byte and the whole answer each within their time, and,
for an endpoint with a concurrency cap, one of its host-wide call slots held while the server works.

httpx bounds each read, not a whole answer: a server that trickles bytes would never time out, so
`fetch` streams the answer and gives up once `total_seconds` have passed.

A local model server keeps generating for a request its client abandoned, and answers the next
request only after it: a call retried at once would wait behind its own abandoned twin, and so would
every other run's. `CappedSender` therefore keeps an abandoned request open in its own thread,
holding its call slot until the server has answered it (or the policy's hard limit passes), so the
next call goes out only when the server is free. The caller gets its timeout at once.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import httpx
from filelock import FileLock, Timeout

SLOT_POLL_SECONDS = 0.05


class TotalTimeout(httpx.TimeoutException):
    """The answer began but did not end within the attempt's total time."""


class FirstByteTimeout(httpx.ReadTimeout):
    """No byte of the answer within the first-byte time (the request stays open to drain, on a capped endpoint)."""


class NoSlot(TimeoutError):
    """Every call slot of the endpoint stayed taken for as long as the run could wait."""


def fetch(
    client: httpx.Client,
    method: str,
    url: str,
    content: bytes | None,
    headers: dict,
    timeout: httpx.Timeout,
    total_seconds: float,
    on_first_byte=None,
) -> httpx.Response:
    """The whole answer, read within `total_seconds` of sending (httpx's own timeouts bound each step)."""
    deadline = time.monotonic() + total_seconds
    with client.stream(method, url, content=content, headers=headers, timeout=timeout) as response:
        if on_first_byte is not None:
            on_first_byte()
        raw = bytearray()
        for chunk in response.iter_raw():
            raw += chunk
            if time.monotonic() > deadline:
                raise TotalTimeout(f"the answer took longer than {total_seconds:g} s", request=response.request)
        if time.monotonic() > deadline:
            raise TotalTimeout(f"the answer took longer than {total_seconds:g} s", request=response.request)
    return httpx.Response(response.status_code, headers=response.headers, content=bytes(raw), request=response.request)


class CallSlots:
    """At most `size` calls in flight to one endpoint from every process on this host: one lock file
    per slot (filelock's flock, released by the OS if a holder dies). A local model server is on this
    host, so a host-wide cap is its cap."""

    def __init__(self, endpoint_id: str, size: int, directory: Path):
        stem = hashlib.sha256(endpoint_id.encode()).hexdigest()[:16]
        directory.mkdir(parents=True, exist_ok=True)
        self.endpoint_id, self.size = endpoint_id, size
        self._paths = [str(directory / f"{stem}.slot{i}.lock") for i in range(size)]

    def acquire(self, seconds: float) -> FileLock:
        """A held slot (release it with `.release()`); NoSlot when none frees up within `seconds`."""
        deadline = time.monotonic() + max(0.0, seconds)
        offset = os.getpid() + threading.get_ident()  # spread first tries over the slots
        while True:
            for i in range(self.size):
                lock = FileLock(self._paths[(offset + i) % self.size], is_singleton=False, thread_local=False)
                try:
                    lock.acquire(timeout=0)
                    return lock
                except Timeout:
                    continue
            if time.monotonic() >= deadline:
                raise NoSlot(f"all {self.size} call slot(s) of {self.endpoint_id} stayed taken for {seconds:.0f} s")
            time.sleep(SLOT_POLL_SECONDS)


class CappedSender:
    """Sends each attempt from its own thread holding a call slot; the caller waits for the first
    byte and the whole answer within their times. An attempt the caller gave up on keeps its slot
    until the server answers it (its hard limit: `drain_seconds`), so no call queues behind it."""

    def __init__(self, client: httpx.Client, slots: CallSlots, drain_seconds: float):
        self.client, self.slots, self.drain_seconds = client, slots, drain_seconds
        self._abandoned: list[threading.Thread] = []

    def send(
        self,
        slot: FileLock,
        method: str,
        url: str,
        content: bytes | None,
        headers: dict,
        first_byte_seconds: float,
        total_seconds: float,
        connect_seconds: float,
    ) -> httpx.Response:
        started, answered = threading.Event(), threading.Event()
        outcome: dict = {}
        hard = httpx.Timeout(self.drain_seconds, connect=connect_seconds)

        def work() -> None:
            try:
                outcome["response"] = fetch(
                    self.client, method, url, content, headers, hard, self.drain_seconds, started.set
                )
            except BaseException as exc:  # handed to the caller, who may have gone
                outcome["error"] = exc
            finally:
                slot.release()
                answered.set()

        thread = threading.Thread(target=work, name=f"capped-call:{self.slots.endpoint_id}", daemon=True)
        sent = time.monotonic()
        thread.start()
        if not _wait_either(started, answered, first_byte_seconds):
            self._abandoned.append(thread)
            raise FirstByteTimeout(f"no first byte within {first_byte_seconds:g} s")
        if not answered.wait(max(0.0, sent + total_seconds - time.monotonic())):
            self._abandoned.append(thread)
            raise TotalTimeout(f"the answer took longer than {total_seconds:g} s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["response"]

    def drain(self) -> None:
        """Wait for abandoned attempts to end (each within its hard limit): the server is free after."""
        for thread in self._abandoned:
            thread.join(self.drain_seconds)
        self._abandoned.clear()


def _wait_either(first: threading.Event, second: threading.Event, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not (first.is_set() or second.is_set()):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        first.wait(min(left, 0.05))
    return True
