"""The operator options declared once (``rebalancer.options``): the CLI's arguments, a child process's argv and the
record read back agree, bad values are one-line errors, and a left-out option keeps the record's default."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.execute import ExecOptions
from rebalancer.options import add_arguments, option, option_fields, to_argv
from rebalancer.options import given as given_options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser, ExecOptions)
    return parser


def _values() -> st.SearchStrategy[dict[str, Any]]:
    """Operator input for ExecOptions, each option maybe left out (None)."""
    maybe = st.none
    return st.fixed_dictionaries({
        "throttle": maybe() | st.sampled_from(["50MB/s", "20MiB/s", "1", "1.5GB/s", " 7 kB "]),
        "schedule": maybe() | st.sampled_from(["auto", "rolling", "batches"]),
        "per_broker": maybe() | st.integers(1, 2**31 - 1),
        "total": maybe() | st.integers(1, 2**31 - 1),
        "max_batch_bytes": maybe() | st.sampled_from(["100GB", "1", "3MiB"]),
        "order": maybe() | st.sampled_from(["bound", "smallest", "largest"]),
        "poll": maybe() | st.floats(1e-6, 3600),
        "timeout_factor": maybe() | st.floats(1e-3, 1e6),
        "min_timeout": maybe() | st.floats(0, 86_400),
        "destination_grace": maybe() | st.floats(0, 86_400),
        "throttle_settle": maybe() | st.floats(0, 86_400),
    })


@settings(max_examples=200, deadline=None)
@given(_values())
def test_the_argv_of_any_options_reads_back_as_the_same_record(values: dict[str, Any]) -> None:
    direct = ExecOptions.from_input(values)
    parsed = ExecOptions.from_input(_parser().parse_args(to_argv(ExecOptions, values)))
    assert parsed == direct
    for f in option_fields(ExecOptions):  # a left-out option is the record's own default, nothing restated
        if values[f.name] is None:
            assert getattr(direct, f.name) == f.default


def test_the_defaults_are_the_records_and_text_options_are_parsed() -> None:
    assert ExecOptions.from_input({}) == ExecOptions()
    assert ExecOptions().throttle == 50_000_000 and ExecOptions().total == 50 and ExecOptions().per_broker is None
    opts = ExecOptions.from_input({"throttle": "20MiB/s", "max_batch_bytes": "1GB", "per_broker": None})
    assert (opts.throttle, opts.max_batch_bytes, opts.per_broker) == (20 * 2**20, 10**9, None)


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-moves", "0"], "'0' must be at least 1"),
    (["--poll", "0"], "'0' must be greater than 0 seconds"),
    (["--min-timeout", "nan"], "'nan' must be a finite number"),
    (["--schedule", "soon"], "invalid choice: 'soon'"),
])
def test_a_value_out_of_its_range_is_refused_naming_the_bound(argv: list[str], message: str) -> None:
    with pytest.raises(argparse.ArgumentError, match=message):
        _parser().parse_args(argv)


def test_a_bad_text_option_is_the_one_line_error_it_is_everywhere() -> None:
    from rebalancer.errors import InputError

    with pytest.raises(InputError, match=r"^invalid throttle 'fast'"):
        ExecOptions.from_input(_parser().parse_args(["--throttle", "fast"]))
    with pytest.raises(InputError, match=r"^invalid --max-batch-bytes '1e9'"):
        ExecOptions.from_input({"max_batch_bytes": "1e9"})


def test_an_option_is_a_plain_value_and_names_its_flag_and_param() -> None:
    by_name = {f.name: f for f in option_fields(ExecOptions)}
    assert (by_name["per_broker"].flag, by_name["per_broker"].param) == ("--max-moves-per-broker", "max_moves_per_broker")
    assert by_name["order"].param is None and by_name["poll"].param == "poll_s"
    assert by_name["throttle"].schema() == {"type": "string", "pattern": by_name["throttle"].spec.pattern}
    assert by_name["per_broker"].schema() == {"type": ["null", "integer"], "minimum": 1, "maximum": 2**31 - 1}

    @dataclass(frozen=True)
    class Odd:
        names: list[str] = option(None, help="a list")

    with pytest.raises(TypeError, match="an option is an int, float, str or bool"):
        option_fields(Odd)
    assert given_options(ExecOptions, {"poll": None}) == {}
    with pytest.raises(TypeError, match="unexpected ExecOptions option.s.: run_dir"):
        given_options(ExecOptions, {"poll": None, "run_dir": "x"})
