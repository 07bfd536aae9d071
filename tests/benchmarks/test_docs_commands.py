"""The `python -m fable_benchmarks` commands the README and docs/ show exist with the flags they give
them, read from the benchmarks' own argparse parser (never from running it). The other commands are
tests/test_docs.py's, which finds the commands on each page for both."""

from __future__ import annotations

import argparse
from functools import cache
from pathlib import Path

import pytest

from fable_benchmarks.command import BenchCommand
from tests.test_docs import PAGES, _page_id, _subcommand_problems, _subcommands, benchmark_words, commands

BENCH = "python -m fable_benchmarks"


@cache
def benchmark_subcommands() -> dict[str, argparse.ArgumentParser]:
    return _subcommands(BenchCommand().create_parser("python -m", "fable_benchmarks"))


def benchmark_problems(command: str) -> list[str]:
    """What does not exist in a benchmark command: an unknown subcommand or flag."""
    words = benchmark_words(command)
    assert words is not None, f"not a benchmark command: {command!r}"
    return _subcommand_problems(benchmark_subcommands(), words, BENCH)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_benchmark_command_shown_exists_with_its_flags(page: Path) -> None:
    shown = [command.text for command in commands(page) if benchmark_words(command.text) is not None]
    problems = [f"`{text}`: {problem}" for text in shown for problem in benchmark_problems(text)]
    assert problems == [], f"{_page_id(page)}: unknown benchmark commands or flags"


def test_the_check_catches_an_unknown_benchmark_flag_or_subcommand() -> None:
    assert benchmark_problems(f"{BENCH} bench-retrieval --no-such-flag")
    assert benchmark_problems(f"{BENCH} bench-nothing")
    assert benchmark_problems("bench-retrieval --no-such-flag")
    assert benchmark_problems(f"{BENCH} bench-latency --nodes 100000") == []
    assert benchmark_problems(".venv/bin/python -m fable_benchmarks bench-cost --json out.json") == []
