"""Work on millions of long-lived objects: ``collector_paused()`` pauses Python's cyclic garbage collector for it.

A plan of a large cluster makes millions of objects that live to its end (a ``Partition`` per partition, the load
model, the placement's lists). The cyclic collector runs a full collection each time the objects that survived
earlier ones grow by a quarter, and each scans all of them again: 14.6 s of a 73 s plan of 3M replicas (36,490
collections, 10.9 s of them full). None of these objects form cycles; reference counting frees them as it always
does, so pausing the collector costs no memory (peak 1,959 MiB with it, 1,960 without), and the first collection
after the work takes the few cycles it left. Used by the plan (and each split group) and the validation (3M: 36.4
-> 31.9 s, the same peak). Not by the snapshot (no time gained on a 300k zk:// read, ~160 MiB more at its peak)
nor by the report (matplotlib's figures are cycles: its peak in the 3M weekly DAG went from 290 to 640 MiB).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside, and as it was (on or off) after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
