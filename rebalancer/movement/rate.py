"""Rates and sizes as an operator writes them: ``50MB/s``, ``20MiB/s``, ``100GB`` or plain bytes (the throttle, the
batch cap). Part of the movement model: the plan's estimate and the executor read a throttle the same way."""

from __future__ import annotations

import re

from ..errors import InputError

__all__ = ["MAX_RATE", "parse_rate"]

MAX_RATE = 2**63 - 1  # the rates are Java longs: a broker cannot parse anything larger (and would not throttle)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_rate(text: str, what: str = "throttle") -> int:
    """'50MB/s', '50MiB/s', '1.5GB/s' or plain bytes per second -> bytes/s (an int from 1 to Kafka's long maximum).
    ``what`` names the option in errors (``parse_rate("100GB", "--max-batch-bytes")`` reads a size the same way)."""
    m = re.fullmatch(r"\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*([kKmMgG]?i?[bB]?)\s*(?:/s)?\s*", text or "")
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise InputError(f"invalid {what} {text!r}: use bytes{' per second' if what == 'throttle' else ''} like "
                         f"50MB{'/s' if what == 'throttle' else ''}, 20MiB or 10000000")
    whole, _, frac = m.group(1).partition(".")
    value = (int(whole) * _UNITS[unit]) + (int(frac) * _UNITS[unit]) // 10 ** len(frac) if frac else int(whole) * _UNITS[unit]
    if value < 1:
        raise InputError(f"invalid {what} {text!r}: must be at least 1 byte")
    if value > MAX_RATE:
        raise InputError(f"invalid {what} {text!r}: above Kafka's largest rate ({MAX_RATE} bytes/s)")
    return value
