"""The ``lakelog`` command: one sub-command per operator tool, mirroring Kafka's scripts.

Like a Unix tool, a command whose standard output is closed early
(``lakelog topics --describe | head -1``) stops quietly with status 141, the
status a shell shows for a process ended by SIGPIPE.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from lakelog import __version__
from lakelog.cli.commands import COMMANDS
from lakelog.errors import LakelogError, MissingDependencyError

if TYPE_CHECKING:
    from lakelog.cli.common import SubParsers

#: Entry-point group through which server/, compaction/ and spark_connector/ add their
#: commands (each entry named as its command) without the core importing them.
COMMANDS_GROUP = "lakelog.commands"
#: Exit status when standard output was closed: 128 + SIGPIPE, as a shell reports it.
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE


def add_unavailable(sub: SubParsers, name: str, error: MissingDependencyError) -> None:
    """``lakelog <name>`` for a command whose part is not installed: whatever the arguments,
    it prints the install hint (not a usage error) and exits 1."""
    extra = error.details.get("extra")
    hint = f"not installed: pip install 'lakelog[{extra}]'" if extra else "not installed"
    parser = sub.add_parser(name, help=f"({hint})", add_help=False, prefix_chars="\0")
    parser.add_argument("arguments", nargs="*")

    def run(args: argparse.Namespace) -> int:
        raise error

    parser.set_defaults(run=run)


def register_plugins(sub: SubParsers) -> None:
    """Add the commands of the installed parts (see ``COMMANDS_GROUP``)."""
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            register = entry.load()
        except MissingDependencyError as exc:  # the part's extra is not installed
            add_unavailable(sub, entry.name, exc)
            continue
        register(sub)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: only the command it names is loaded, with its options; the
    other built-in commands are their names and help lines (``lakelog.cli.commands``).
    Without ``argv``, every command is loaded."""
    parser = argparse.ArgumentParser(
        prog="lakelog", description="Kafka's log model on Delta Lake tables."
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = None if argv is None else _command_named(argv)
    for name, command in COMMANDS.items():
        if argv is None or name == chosen:
            importlib.import_module(command.module).register(sub)
        else:
            sub.add_parser(name, help=command.help)
    if chosen not in COMMANDS and (chosen is not None or _asks_for_help(argv)):
        register_plugins(sub)
    add_version_everywhere(sub)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names: its first word that is not an option (the top-level
    parser takes no option with a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _asks_for_help(argv: Sequence[str] | None) -> bool:
    return argv is None or any(word in ("-h", "--help") for word in argv)


def add_version_everywhere(sub: SubParsers) -> None:
    """Every Kafka tool takes --version, so every (sub-)command does too, except those
    whose part is not installed: they take no options (``add_unavailable``)."""
    for command in sub.choices.values():
        if "-" not in command.prefix_chars:
            continue
        add_version(command)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                add_version_everywhere(action)


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version", action="version", version=__version__, help="print the version and exit"
    )


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed sub-command; a lakelog error becomes a message and exit code 1."""
    from lakelog.cli.common import client_security  # loaded with the command, not before

    try:
        with client_security(args):
            code: int = args.run(args)
    except LakelogError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return code


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            words = sys.argv[1:] if argv is None else argv
            code = run_command(build_parser(words).parse_args(words))
        finally:
            # What is still buffered is written here, where a closed pipe is caught,
            # not by the interpreter at exit (--help and --version exit through here too).
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_STDOUT_CLOSED
    return code


def _discard_stdout() -> None:
    """Point stdout at /dev/null: what a failed flush left buffered is flushed again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file descriptor (an embedding program's stream)
        return


if __name__ == "__main__":
    sys.exit(main())
