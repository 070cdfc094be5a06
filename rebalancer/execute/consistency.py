"""Reading after writing on an eventually consistent cluster: wait until every broker agrees.

A config change or a new topic reaches Kafka's brokers a moment after it was made: through the metadata log in KRaft,
through a ZooKeeper notification in ZooKeeper mode. A read right after a write, through another broker than the one
that took it, can miss it. ``until_agreed`` asks every broker for its own view (``read``), folds the views into one
answer when they agree (``fold``; None while they differ), and polls until they do and the answer is what the
caller waits for (``want``), or raises ``NotAgreed`` naming the brokers that still differ.

``agreed_throttles`` is the fold for throttle configs (``AdminBackend.throttle_views``): topic configs must be the
same on every broker; a broker's own config is what that broker reports (no other broker can describe it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from ..retry import poll as poll_until

__all__ = ["NotAgreed", "until_agreed", "same_views", "agreed_throttles"]

V = TypeVar("V")
T = TypeVar("T")
Entity = tuple[str, str]
Configs = dict[Entity, dict[str, str]]


class NotAgreed(AssertionError):
    """The brokers did not agree (or not on what was wanted) within the deadline."""


def until_agreed(read: Callable[[], Mapping[int, V]], fold: Callable[[Mapping[int, V]], T | None], *,
                 want: Callable[[T], bool] | None = None, timeout: float = 30.0, poll: float = 0.2,
                 what: str = "the brokers' views", sleep: Callable[[float], None] = time.sleep) -> T:
    """Poll ``read`` (broker id -> that broker's view) until ``fold`` makes one answer of the views and ``want``
    (if given) accepts it; return that answer (``retry.poll``: every ``poll`` seconds, ``timeout`` in all)."""
    def look() -> tuple[Mapping[int, V], T | None]:
        views = read()
        return views, fold(views)

    def wanted(seen: tuple[Mapping[int, V], T | None]) -> bool:
        return seen[1] is not None and (want is None or want(seen[1]))

    (views, agreed), done = poll_until(look, wanted, timeout=timeout, interval=poll, sleep=sleep)
    if done and agreed is not None:
        return agreed
    if agreed is None:
        raise NotAgreed(f"the brokers still disagree on {what} after {timeout:g} s: "
                        + "; ".join(f"broker {b}: {v}" for b, v in sorted(views.items())))
    raise NotAgreed(f"the brokers agree on {what} after {timeout:g} s, but not as expected: {agreed}")


def same_views(views: Mapping[int, V]) -> V | None:
    """The one view every broker has, or None while they differ (the fold for views that must be equal)."""
    values = list(views.values())
    if not values or any(v != values[0] for v in values[1:]):
        return None
    return values[0]


def agreed_throttles(views: Mapping[int, Mapping[Entity, Mapping[str, str]]]) -> Configs | None:
    """Every broker's own view of the throttles as one, or None while the views of the topics differ."""
    topic_views = [{e: dict(c) for e, c in view.items() if e[0] == "topics"} for view in views.values()]
    if any(v != topic_views[0] for v in topic_views[1:]):
        return None
    out: Configs = dict(topic_views[0]) if topic_views else {}
    for broker, view in views.items():
        own = view.get(("brokers", str(broker)))
        if own:
            out[("brokers", str(broker))] = dict(own)
    return out
