"""Progress on stderr: a live panel on a terminal; otherwise one line per stage change, and the
counts every ten seconds or so within a long stage, also when none of them moves.

The pipeline only bumps counters (``run_progress.Progress``); this module decides how to show
them, so library users and tests get no output at all.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from streamrag.run_progress import Progress
from streamrag.words import counted, number

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class _Panel:
    def __init__(self, progress: Progress, llm_stats: Any, started: float) -> None:
        self.progress = progress
        self.llm_stats = llm_stats
        self.started = started

    def __rich__(self) -> Table:
        from rich.table import Table

        p = self.progress
        c, t = p.counts, p.totals
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        table.add_row("stage", f"{p.stage}  ({time.monotonic() - self.started:.0f} s)")
        table.add_row("files", f"{c['files_done']}/{t.get('files', 0)}")
        table.add_row("chunks", f"{c['chunks_extracted']} extracted, {c['chunks_reused']} reused, "
                                f"{c['chunks_total']} seen")
        if t["summaries"]:
            table.add_row("summaries", f"{c['summaries_done']}/{t['summaries']}")
        if t["reports"]:
            table.add_row("reports", f"{c['reports_done']}/{t['reports']}")
        stats = self.llm_stats() or {}
        calls = sum(s.get("calls", 0) for s in stats.values())
        cached = sum(s.get("cached", 0) for s in stats.values())
        tokens = sum(s.get("prompt_tokens", 0) + s.get("completion_tokens", 0) for s in stats.values())
        if calls:
            table.add_row("LLM", f"{counted(calls, 'call')}, {number(cached)} cached, {number(tokens)} tokens")
        if c["failures"]:
            table.add_row("failures", f"[red]{c['failures']}[/red] (listed by `streamrag status --failures`)")
        return table


EVERY_S = 10.0  # off a terminal: seconds between count lines within one stage
STILL_S = 10.0  # off a terminal: seconds without a line before one says the stage goes on
# Off a terminal, the lines of the stages a run passes before it knows whether it has anything
# to redo are held until a later stage begins, or a count line or the ticker speaks, or they
# have lasted HELD_S: a run with nothing to redo then says none of them, unless its scan took time.
UNDECIDED = ("scanning", "extracting")
HELD_S = 1.0


def _counts_line(p: Progress) -> str:
    c, t = p.counts, p.totals
    parts = [f"files {c['files_done']}/{t.get('files', 0)}",
             f"chunks {c['chunks_extracted']} extracted, {c['chunks_reused']} reused"]
    if t["summaries"]:
        parts.append(f"summaries {c['summaries_done']}/{t['summaries']}")
    if t["reports"]:
        parts.append(f"reports {c['reports_done']}/{t['reports']}")
    if c["failures"]:
        parts.append(f"failures {c['failures']}")
    return "; ".join(parts)


def _lasted(held: list[tuple[float, str]], now: float) -> int:
    """How many of the ``held`` stages to say at ``now``: up to the last one that lasted HELD_S
    (until the next began, or until now), so a quick stage after a slow one stays held."""
    ends = [began for began, _ in held[1:]] + [now]
    return max((i + 1 for i, ((began, _), end) in enumerate(zip(held, ends)) if end - began >= HELD_S),
               default=0)


def _terminal() -> Console | None:
    """rich's console on stderr if rich takes stderr for a terminal, else None. rich (40 ms of
    CPU) is loaded only where it may: on a tty, or told of one by a variable it reads
    (``FORCE_COLOR``, ``TTY_COMPATIBLE``); not for a log, nor for `index -q` or library callers."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):   # (no stderr, or a closed one: rich sees no terminal)
        tty = False
    if not tty and "FORCE_COLOR" not in os.environ and "TTY_COMPATIBLE" not in os.environ:
        return None
    from rich.console import Console

    console = Console(stderr=True)
    return console if console.is_terminal else None


@contextmanager
def show(progress: Progress, llm_stats=lambda: {}, *, enabled: bool = True):
    """Display ``progress`` on stderr while the block runs."""
    if not enabled:
        yield
        return
    started = time.monotonic()
    console = _terminal()
    if console is not None:
        from rich.live import Live

        with Live(_Panel(progress, llm_stats, started), console=console, refresh_per_second=4,
                  transient=False) as live:
            yield
            # A run with nothing to redo leaves no panel of stages it did not run: its summary
            # ("Nothing changed: ...") says it all.
            live.transient = progress.nothing_to_redo
        return
    last = [""]
    last_counts = [started, ""]
    held: list[tuple[float, str]] = []   # (when it began, stage) of UNDECIDED stages not yet said
    lock = threading.Lock()

    def say(now: float, text: str) -> None:
        last_counts[0] = now
        print(f"[{now - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    def say_held(upto: int | None = None) -> None:
        for began, stage in held[:upto]:
            say(began, stage)
        del held[:upto]

    def on_change(p: Progress) -> None:
        with lock:
            now = time.monotonic()
            if p.stage != last[0]:
                last[0] = p.stage
                if p.nothing_to_redo:   # (stages passed through at once, nothing run)
                    say_held(_lasted(held, now))
                    held.clear()
                elif p.stage in UNDECIDED:
                    held.append((now, p.stage))
                else:
                    say_held()
                    say(now, p.stage)
            elif now - last_counts[0] >= EVERY_S:
                # Between stage changes, the counts now and then, so a long stage is not silent.
                line = _counts_line(p)
                if line != last_counts[1]:
                    last_counts[1] = line
                    say_held()
                    say(now, f"{p.stage}: {line}")

    def heartbeat() -> None:
        # Work that moves no counter for a while (one huge file being cut, a large publish)
        # still gets a line every STILL_S, so a log never looks stuck.
        while not done.wait(min(STILL_S, HELD_S) / 4):
            with lock:
                now = time.monotonic()
                say_held(_lasted(held, now))   # (a scan that takes time is said)
                if now - last_counts[0] >= STILL_S:   # the first stage too (a slow scan)
                    say_held()
                    say(now, f"{progress.stage}: {_counts_line(progress)} (still working)")

    done = threading.Event()
    ticker = threading.Thread(target=heartbeat, name="progress", daemon=True)
    progress.listeners.append(on_change)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        progress.listeners.remove(on_change)
        if not progress.nothing_to_redo:   # (a run that failed in its scan: where it was)
            say_held()
