"""The tests' one way to wait: poll a condition until it holds, or fail naming what never happened.

Tests never sleep for a fixed time (a sleep long enough on a busy CI machine is slow everywhere else): they wait for
what they need to see, with a deadline, and a deadline that passes is a failure that says what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["wait_for"]


def wait_for(cond: Callable[[], object], timeout: float = 20.0, what: str = "condition", poll: float = 0.05) -> Any:
    """Call ``cond`` every ``poll`` s until it returns something truthy (returned); after ``timeout`` s raise
    ``AssertionError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)
    return value
