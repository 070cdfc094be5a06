"""One retry policy (``rebalancer.retry``, tenacity): what is retried, for how long, with a sleep a test replaces."""

from __future__ import annotations

import pytest

from rebalancer.errors import SourceError, TransientError
from rebalancer.execute.consistency import NotAgreed, same_views, until_agreed
from rebalancer.retry import poll, retry_call


class Flaky:
    """Raises ``error`` the first ``failures`` calls, then returns how many calls it took."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.calls


def test_a_transient_error_is_retried_at_the_interval_until_the_call_succeeds() -> None:
    slept: list[float] = []
    seen: list[str] = []
    flaky = Flaky(3, TransientError("session lost"))
    assert retry_call(flaky, on=TransientError, patience=60, interval=0.5, sleep=slept.append,
                      before_retry=lambda exc: seen.append(str(exc))) == 4
    assert slept == [0.5, 0.5, 0.5] and seen == ["session lost"] * 3


def test_past_its_patience_the_last_error_is_raised_and_any_other_error_at_once() -> None:
    slept: list[float] = []
    flaky = Flaky(10, TransientError("still lost"))
    with pytest.raises(TransientError, match="still lost"):
        retry_call(flaky, on=TransientError, patience=0, sleep=slept.append)
    assert flaky.calls == 1 and slept == []
    other = Flaky(1, SourceError("denied"))
    with pytest.raises(SourceError, match="denied"):
        retry_call(other, on=TransientError, patience=60, sleep=slept.append)
    assert other.calls == 1 and slept == []


def test_poll_returns_the_first_value_wanted_or_the_last_one_read() -> None:
    values = iter(range(10))
    slept: list[float] = []
    assert poll(lambda: next(values), lambda v: v >= 3, timeout=60, interval=0.2, sleep=slept.append) == (3, True)
    assert slept == [0.2] * 3
    assert poll(lambda: 7, lambda v: v > 7, timeout=0, interval=0.2, sleep=slept.append) == (7, False)


def test_until_agreed_waits_for_the_brokers_and_names_those_that_differ() -> None:
    views = iter([{1: "a", 2: "b"}, {1: "a", 2: "b"}, {1: "c", 2: "c"}])
    slept: list[float] = []
    assert until_agreed(lambda: next(views), same_views, timeout=60, sleep=slept.append) == "c"
    assert slept == [0.2, 0.2]
    with pytest.raises(NotAgreed, match="still disagree on the configs after 0 s: broker 1: a; broker 2: b"):
        until_agreed(lambda: {1: "a", 2: "b"}, same_views, timeout=0, what="the configs", sleep=slept.append)
    with pytest.raises(NotAgreed, match="agree on the configs after 0 s, but not as expected: a"):
        until_agreed(lambda: {1: "a", 2: "a"}, same_views, want=lambda v: v == "b", timeout=0, what="the configs")
