"""Warm boxes for submission runs: one per slot, each serving ONE submission.

A cold box pays about 1.5 s of imports per run, and one scoring makes dozens of
runs of the same submission (the scorer's refit, the judge's checks). So each
slot (uid 62000+k) keeps a warm zygote (box.Zygote) for the runs of one
submission source, named by its SHA-256, until the slot is wanted for another
source. A run therefore never shares a zygote with another team's code or with
another submission's data: whatever a call might leave in its zygote reaches only
later runs of the very same source.

A run of a source that holds a free slot takes that one (most recently used
first). A new source takes a fresh box, started ahead of time, and another fresh
box is then started in the background in place of the least recently used free
slot, so the next new source does not wait for imports either.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Callable

from lawlab_sandbox import box

log = logging.getLogger("lawlab.sandbox")

FRESH = ""  # the key of a box that has served no source yet


class SubmissionSlots:
    def __init__(self, uids: list[int], make: Callable[[int], box.Zygote] | None) -> None:
        self._make = make  # None: cold mode, a slot is only its uid (a fresh box per run)
        self._free: list[int] = list(uids)  # least recently used first
        self._key: dict[int, str] = {}  # slot -> the source digest its box serves
        self._boxes: dict[int, box.Zygote] = {}
        self._changed = asyncio.Condition()
        self._refreshing: set[asyncio.Task[None]] = set()
        self._closed = False

    @staticmethod
    def key(source: str) -> str:
        return hashlib.sha256(source.encode()).hexdigest()

    def serving(self) -> dict[int, str]:
        """Which source digest each slot's box serves (FRESH: none yet)."""
        return dict(self._key)

    @contextlib.asynccontextmanager
    async def slot(self, source: str) -> AsyncIterator[tuple[int, box.Zygote | None]]:
        """A slot and its warm box (None in cold mode) for a run of ``source``, held
        until the block ends."""
        key = self.key(source)
        uid = await self._take(key)
        try:
            zygote = self._boxes.get(uid)
            if self._make is not None and self._key.get(uid) != key:
                if zygote is not None and self._key.get(uid) != FRESH:
                    await zygote.stop()  # it served another source: it never serves this one
                    zygote = None
                if zygote is None:
                    zygote = self._boxes[uid] = self._make(uid)
                self._key[uid] = key
                self._refresh()
            yield uid, zygote
        finally:
            self._free.append(uid)
            async with self._changed:
                self._changed.notify_all()

    async def _take(self, key: str) -> int:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._free))
            mine = [u for u in self._free if self._key.get(u) == key]
            fresh = [u for u in self._free if self._key.get(u, FRESH) == FRESH]
            uid = (mine or fresh or self._free)[-1 if mine else 0]
            self._free.remove(uid)
            return uid

    def _refresh(self) -> None:
        """Keep one fresh box started in a free slot: in a slot that has none yet,
        else in place of the least recently used box that serves a source."""
        def fresh(u: int) -> bool:
            return self._key.get(u, FRESH) == FRESH
        if self._closed or self._refreshing or any(fresh(u) and u in self._boxes
                                                   for u in self._free):
            return  # one is waiting, or on its way
        empty = [u for u in self._free if u not in self._boxes]
        used = [u for u in self._free if not fresh(u)]
        if not (empty or used):
            return
        uid = (empty or used)[0]
        self._free.remove(uid)
        task = asyncio.ensure_future(self._restart(uid))
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _restart(self, uid: int) -> None:
        assert self._make is not None  # only warm slots are refreshed
        try:
            old = self._boxes.pop(uid, None)
            self._key[uid] = FRESH
            if old is not None:
                await old.stop()
            zygote = self._boxes[uid] = self._make(uid)
            await zygote.start()  # its imports run while the slot waits, unused
            if self._closed:
                await zygote.stop()
        except Exception as err:  # noqa: BLE001  (the next run of this slot starts one itself)
            log.warning("could not start a fresh sandbox box ahead of time: %s", err)
        finally:
            self._free.insert(0, uid)
            async with self._changed:
                self._changed.notify_all()

    async def close(self) -> None:
        self._closed = True
        for task in list(self._refreshing):
            task.cancel()
        await asyncio.gather(*self._refreshing, return_exceptions=True)
        for zygote in list(self._boxes.values()):
            await zygote.stop()
