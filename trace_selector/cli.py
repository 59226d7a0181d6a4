"""The `trace-selector` command: a dispatch table over plain typed functions.

Each subcommand declares its arguments here and calls one function of the package; the function
does the work and is what tests call. Heavy modules are imported only by the subcommand that needs
them, so `trace-selector validate` starts in well under a second. Any `InputError` becomes one line
on stderr and exit code 1.

    trace-selector --help
    trace-selector validate pool.jsonl.gz
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from trace_selector.errors import InputError

Handler = Callable[[argparse.Namespace], int]


def _validate(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("pool", type=Path, help="pool file (.jsonl, .jsonl.gz or .parquet)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.records import summarize_pool

        summary = summarize_pool(a.pool)
        print(summary.to_json() if a.json else summary.to_text())
        return 0

    return run


def _data(p: argparse.ArgumentParser) -> Handler:
    sub = p.add_subparsers(dest="action", required=True)
    prep = sub.add_parser("prepare", help="build a bundled search setting's corpus, pages, questions and index")
    prep.add_argument("--setting", default="wikileads", help="bundled setting to build (default: wikileads)")
    prep.add_argument("--out", type=Path, default=None, help="output folder (default: $TRACE_SELECTOR_HOME/settings/<setting>)")
    prep.add_argument("--force", action="store_true", help="rebuild even if the files exist")
    summ = sub.add_parser("summary", help="print a prepared setting's summary and quality report")
    summ.add_argument("--setting", default="wikileads")
    summ.add_argument("--dir", type=Path, default=None, help="prepared folder (default: the cache)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector import setting

        if a.action == "prepare":
            report = setting.prepare(a.setting, out=a.out, force=a.force)
        else:
            report = setting.summary(a.setting, directory=a.dir)
        print(report)
        return 0

    return run


def _index(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("corpus", type=Path, help="corpus in FlashRAG JSONL ({'id', 'contents': '\"Title\"\\ntext'})")
    p.add_argument("--out", type=Path, required=True, help="index folder to write")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.search.bm25 import build_index

        info = build_index(a.corpus, a.out)
        print(info)
        return 0

    return run


def _search(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("query", help="search query")
    p.add_argument("--index", type=Path, default=None, help="index folder (default: the prepared setting's)")
    p.add_argument("--setting", default="wikileads", help="prepared setting whose index to use")
    p.add_argument("-k", type=int, default=3, help="number of passages (default 3)")

    def run(a: argparse.Namespace) -> int:
        from trace_selector.search.bm25 import BM25Index, format_results
        from trace_selector.setting import index_dir

        index = BM25Index.load(a.index or index_dir(a.setting))
        print(format_results(index.search(a.query, a.k)))
        return 0

    return run


# name -> (one-line help, argument builder returning the handler)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Handler]]] = {
    "data": ("prepare or summarise a bundled search setting", _data),
    "index": ("build a BM25 index over a FlashRAG JSONL corpus", _index),
    "search": ("query a BM25 index", _search),
    "validate": ("check a rollout pool and print its summary", _validate),
}


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    """Top-level parser; only `command`'s arguments are built (all when None, for --help)."""
    parser = argparse.ArgumentParser(
        prog="trace-selector",
        description="Pick the right answer among K parallel search-agent trajectories.",
    )
    from trace_selector import __version__

    parser.add_argument("--version", action="version", version=f"trace-selector {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    handlers: dict[str, Handler] = {}
    for name, (help_line, builder) in COMMANDS.items():
        p = sub.add_parser(name, help=help_line, description=help_line)
        if command is None or command == name:
            handlers[name] = builder(p)
    return parser, handlers


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((x for x in argv if not x.startswith("-")), None)
    parser, handlers = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        return handlers[args.command](args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
