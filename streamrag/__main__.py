"""``python -m streamrag`` (and ``python -m streamrag.cli``) and the ``streamrag`` command:
``cli.main``, imported inside ``run`` so that a Ctrl-C while the program loads (its imports take
a few tenths of a second) ends it as a Ctrl-C during a command does, with one line and 130, not
with a traceback."""

import sys


def run() -> int:
    try:
        from streamrag.cli import main
    except KeyboardInterrupt:
        if sys.stderr is not None:   # (closed with 2>&-: print would write to stdout)
            try:
                print("streamrag: interrupted", file=sys.stderr)
            except (OSError, ValueError):
                pass
        return 130
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
