"""One policy for a call that may fail for a moment and for a wait on a condition, through tenacity (pinned with
Airflow): a fixed interval, a deadline in seconds since the first try, and a ``sleep`` a test may replace.

- ``retry_call``: call again while the call raises one of the given errors, until the patience runs out; then the
  last error is raised (the caller turns it into its own one-line error). The executor rides out a ZooKeeper
  session or a broker lost for a moment this way (``execute.runner``), the Admin API backend a controller moving
  (``access.admin_backend``).
- ``poll``: read until a value is what is wanted or the time is up; returns the last value and whether it was
  (``execute.consistency.until_agreed`` waits for the brokers to agree this way).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_exception_type, retry_if_result, stop_after_delay, wait_fixed

__all__ = ["retry_call", "poll"]

T = TypeVar("T")


def retry_call(fn: Callable[[], T], *, on: type[BaseException] | tuple[type[BaseException], ...], patience: float,
               interval: float = 0.5, before_retry: Callable[[BaseException], None] | None = None,
               sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn()``; while it raises ``on`` and fewer than ``patience`` seconds have passed since the first call,
    ``before_retry(error)`` (a log line), ``sleep(interval)`` and call again. Past the patience, the last error is
    raised as it was; any other error at once."""
    def say(state: object) -> None:
        outcome = getattr(state, "outcome", None)
        error = outcome.exception() if outcome is not None else None
        if before_retry is not None and error is not None:
            before_retry(error)

    retrying = Retrying(retry=retry_if_exception_type(on), stop=stop_after_delay(patience), wait=wait_fixed(interval),
                        sleep=sleep, reraise=True, before_sleep=say)
    return retrying(fn)


def poll(read: Callable[[], T], done: Callable[[T], bool], *, timeout: float, interval: float,
         sleep: Callable[[float], None] = time.sleep) -> tuple[T, bool]:
    """``read()`` every ``interval`` seconds until ``done`` accepts its value or ``timeout`` seconds have passed
    since the first read. Returns (the last value read, whether ``done`` accepted it)."""
    last: list[T] = []

    def attempt() -> T:
        value = read()
        last[:] = [value]
        return value

    retrying = Retrying(retry=retry_if_result(lambda value: not done(value)), stop=stop_after_delay(timeout),
                        wait=wait_fixed(interval), sleep=sleep, retry_error_callback=lambda _state: None)
    retrying(attempt)
    return last[0], done(last[0])
