"""Group commit: the writes that arrive together share one transaction and one flush to disk.

Each submission is a short write, and a commit that waits for the disk (SQLite's
`synchronous=FULL`) is most of it; committed one by one, 50 concurrent submissions queue for
the database one after the other. `GroupCommit.run(work)` hands `work` to one writer thread,
which takes every piece of work waiting, runs them all in one transaction, commits once and
answers each caller, as PostgreSQL's group commit does for its WAL. Nothing is acknowledged
before its commit.

A piece of work that fails (a unique key taken, a bad value) must not fail the others: the
writer then rolls the group back and runs each piece again in a transaction of its own, so
each caller gets its own result or its own error.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from sqlalchemy.orm import Session

log = logging.getLogger("andreas.service")

Work = Callable[[Session], Any]


class GroupCommit:
    MAX_GROUP = 256  # pieces of work per transaction

    def __init__(self, store: Any) -> None:  # a Store (store/core.py imports this module)
        self.store = store
        self._queue: queue.SimpleQueue[tuple[Work, Future] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def run(self, work: Work) -> Any:
        """Run `work(session)` in a transaction shared with other callers'; return its result
        once committed, or raise its error."""
        return self.submit(work).result()

    def submit(self, work: Work) -> Future:
        """Queue `work(session)` for the next shared transaction: the future holds its result
        once committed, or its error. (An event loop awaits it with `asyncio.wrap_future`.)"""
        future: Future = Future()
        self._ensure_started()
        self._queue.put((work, future))
        return future

    def close(self) -> None:
        with self._start_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=30)

    def _ensure_started(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="andreas-group-commit",
                                                daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            while len(group) < self.MAX_GROUP:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after this group
                    break
                group.append(item)
            self._commit(group)

    def _commit(self, group: list[tuple[Work, Future]]) -> None:
        if len(group) > 1:
            try:
                with self.store.session() as s:
                    results = [work(s) for work, _ in group]
                for (_, future), result in zip(group, results):
                    future.set_result(result)
                return
            except Exception:  # one piece failed: each again on its own, to find which
                log.debug("a group of %d writes failed; committing them one by one",
                          len(group))
        for work, future in group:
            try:
                with self.store.session() as s:
                    result = work(s)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
