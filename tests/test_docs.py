"""The README and docs/ keep their word: every relative link leads to a file (and a heading) that
exists, and every command they show exists with the flags they give it: `make` targets in the
Makefile, `openfable` / `manage.py openfable` subcommands and other `manage.py` commands, each read
from its own argparse parser (never from running it). No database: the parsers are built, not run.
The `python -m fable_benchmarks` commands the pages show are checked the same way by
tests/benchmarks/test_docs_commands.py: the product's tests never import the benchmarks."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_SHELL_FENCE = re.compile(r"^```(?:sh|bash|shell|console)?\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Command:
    page: str
    text: str


# ------------------------------------------------------------------ reading the pages


def _prose(text: str) -> str:
    """The page without its fenced code blocks (links and inline commands live in prose)."""
    return _FENCE.sub("", text)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its words
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_prose(path.read_text(encoding="utf-8"))):
        anchor, n = github_anchor(heading), 0
        while (anchor if n == 0 else f"{anchor}-{n}") in found:
            n += 1
        found.add(anchor if n == 0 else f"{anchor}-{n}")
    return found


def relative_links(path: Path) -> Iterator[str]:
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            yield target


def link_problem(page: Path, target: str) -> str | None:
    """Why ``target``, linked from ``page``, leads nowhere; None when it leads somewhere."""
    file_part, _, anchor = target.partition("#")
    destination = (page.parent / file_part).resolve() if file_part else page
    if not destination.exists():
        return f"{target}: no file {destination.relative_to(REPO_ROOT) if destination.is_relative_to(REPO_ROOT) else destination}"
    if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
        return f"{target}: no heading #{anchor} in {destination.name}"
    return None


_PREFIXES = (
    "make ",
    "openfable ",
    "manage.py ",
    "python manage.py ",
    "python -m fable_benchmarks ",
    ".venv/bin/python -m fable_benchmarks ",
    "bench-",
)


def commands(path: Path) -> Iterator[Command]:
    """The commands a page shows: each line of a shell block, and each inline code span, that
    starts with one of the project's commands."""
    text = path.read_text(encoding="utf-8")
    for block in _SHELL_FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith(_PREFIXES):
                yield Command(path.name, line)
    for span in _INLINE.findall(_prose(text)):
        span = " ".join(span.split())
        if span.startswith(_PREFIXES):
            yield Command(path.name, span)


def _words(text: str) -> list[str]:
    text = re.split(r"\s#\s|\s#$|\s{2,}#", text)[0]  # a trailing comment
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote in prose
        words = text.split()
    return [word.strip("[]") for word in words if word.strip("[]")]


# ------------------------------------------------------------------ what exists


@cache
def make_targets() -> frozenset[str]:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile, re.M))


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@cache
def openfable_subcommands() -> dict[str, argparse.ArgumentParser]:
    from cli.management.commands.openfable import Command as OpenfableCommand

    return _subcommands(OpenfableCommand().create_parser("manage.py", "openfable"))


@cache
def management_commands() -> dict[str, str]:
    from django.core.management import get_commands

    return get_commands()


def _management_parser(name: str) -> argparse.ArgumentParser:
    from django.core.management import load_command_class

    return load_command_class(management_commands()[name], name).create_parser("manage.py", name)


def _flag_problems(parser: argparse.ArgumentParser, words: list[str], what: str) -> list[str]:
    known = parser._option_string_actions
    flags = [word.split("=", 1)[0] for word in words if re.match(r"^--?[A-Za-z]", word)]
    return [f"{what} has no flag {flag}" for flag in flags if flag not in known]


def _placeholder(word: str) -> bool:
    return "…" in word or "..." in word


def benchmark_words(command: str) -> list[str] | None:
    """The words after `python -m fable_benchmarks` of a benchmark command (a bare `bench-…` too);
    None for any other command."""
    words = _words(command)
    if words[:1] in (["python"], [".venv/bin/python"]) and words[1:3] == ["-m", "fable_benchmarks"]:
        return words[3:]
    return words if words[:1] and words[0].startswith("bench-") else None


def command_problems(command: str) -> list[str]:
    """What does not exist in ``command``: an unknown target, subcommand or flag. Benchmark
    commands are tests/benchmarks/test_docs_commands.py's: none here."""
    if benchmark_words(command) is not None:
        return []
    words = _words(command)
    if words[:2] == ["python", "manage.py"]:
        words = words[1:]
    if words[:1] == ["make"]:
        targets = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        return [
            f"the Makefile has no target {target!r}" for target in targets if target not in make_targets()
        ]
    if words[:2] == ["manage.py", "openfable"]:
        words = words[1:]
    if words[:1] == ["manage.py"]:
        if len(words) < 2 or _placeholder(words[1]):
            return []
        if words[1] not in management_commands():
            return [f"no management command {words[1]!r}"]
        return _flag_problems(_management_parser(words[1]), words[2:], f"manage.py {words[1]}")
    if words[:1] == ["openfable"]:
        return _subcommand_problems(openfable_subcommands(), words[1:], "openfable")
    return [f"not a command this check knows: {command!r}"]


def _subcommand_problems(
    subcommands: dict[str, argparse.ArgumentParser], words: list[str], what: str
) -> list[str]:
    if not words or _placeholder(words[0]) or words[0] in ("-h", "--help"):
        return []
    if words[0] not in subcommands:
        return [f"{what} has no subcommand {words[0]!r}"]
    nested = _subcommands(subcommands[words[0]])  # a group: `openfable collection create`
    if nested:
        return _subcommand_problems(nested, words[1:], f"{what} {words[0]}")
    return _flag_problems(subcommands[words[0]], words[1:], f"{what} {words[0]}")


# ------------------------------------------------------------------ the tests


def _page_id(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    problems = [problem for target in relative_links(page) if (problem := link_problem(page, target))]
    assert problems == [], f"{_page_id(page)}: broken links"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_command_shown_exists_with_its_flags(page: Path) -> None:
    shown = list(commands(page))
    problems = [
        f"`{command.text}`: {problem}" for command in shown for problem in command_problems(command.text)
    ]
    assert problems == [], f"{_page_id(page)}: unknown commands or flags"


def test_the_readme_leads_with_the_two_commands() -> None:
    """CI (`.ci/run`) runs the README's test command; the README opens with `make run` and
    `make test`, nothing before them but what OpenFable is."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    first_block = _SHELL_FENCE.search(readme)
    assert first_block is not None
    assert [line.split("#")[0].strip() for line in first_block.group(1).splitlines()] == [
        "make run",
        "make test",
    ]
    assert readme[: first_block.start()].count("\n## ") == 1  # only the "Two commands" heading
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_checks_catch_a_broken_link_and_an_unknown_command() -> None:
    """The checks above fail when they should: on a missing file or heading, and on an unknown
    target, subcommand or flag."""
    readme = REPO_ROOT / "README.md"
    assert link_problem(readme, "docs/no-such-page.md")
    assert link_problem(readme, "docs/configuration.md#no-such-heading")
    assert link_problem(readme, "docs/configuration.md#retrieval") is None
    assert command_problems("make deploy")
    assert command_problems("openfable index notes.md --no-such-flag")
    assert command_problems("openfable frobnicate")
    assert command_problems("python manage.py migrate --no-such-flag")
    assert command_problems("manage.py no_such_command")
    assert command_problems("openfable index notes.md --wait --collection reports") == []
    assert command_problems("openfable collection create Reports --slug reports") == []
    assert command_problems("openfable collection create Reports --no-such-flag")
    assert command_problems("openfable collection frobnicate")
    assert command_problems("python manage.py openfable reembed --dimensions 384") == []
    assert github_anchor("API, sign-in and rate limits") == "api-sign-in-and-rate-limits"
    assert github_anchor("Files: PDF, Word, HTML, Markdown, text") == "files-pdf-word-html-markdown-text"
