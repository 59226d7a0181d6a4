"""`python -m trace_selector ...` is the same as the `trace-selector` command."""

from trace_selector.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
