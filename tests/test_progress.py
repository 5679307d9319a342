"""Progress off a terminal: a line per stage, and the counts now and then within a long stage."""

from __future__ import annotations

import time

from streamrag import progress as shown
from streamrag.run_progress import Progress


def untimed(err: str) -> list[str]:
    """The lines of ``err`` without the time each begins with ("[   1.2s] ")."""
    return [line.split("] ", 1)[1] for line in err.splitlines()]


def said_until(capsys, still: int) -> str:
    """What stderr says once it holds ``still`` lines saying the stage goes on: waited for, up to
    a minute (a loaded machine's ticker comes late, not wrong), not slept for a fixed time."""
    said = ""
    deadline = time.monotonic() + 60
    while said.count("(still working)") < still and time.monotonic() < deadline:
        time.sleep(0.02)
        said += capsys.readouterr().err
    return said


def test_a_long_stage_off_a_terminal_prints_its_counts(capsys, monkeypatch):
    p = Progress()
    monkeypatch.setattr(shown, "EVERY_S", 0.0)
    with shown.show(p):
        p.set_stage("extracting")
        p.total("files", 3)
        p.add("files_done")
        p.add("chunks_extracted", 4)
        p.add("chunks_extracted", 0)           # nothing new: no repeated line
        p.set_stage("reporting")
    assert untimed(capsys.readouterr().err) == [
        "extracting",
        "extracting: files 0/3; chunks 0 extracted, 0 reused",
        "extracting: files 1/3; chunks 0 extracted, 0 reused",
        "extracting: files 1/3; chunks 4 extracted, 0 reused",
        "reporting",
    ]


def test_counts_wait_for_the_interval(capsys):
    p = Progress()
    with shown.show(p):                           # the default interval: no count line this fast
        p.set_stage("extracting")
        p.add("chunks_extracted", 2)
    assert untimed(capsys.readouterr().err) == ["extracting"]


def test_a_stage_that_moves_no_counter_still_gets_a_line(capsys, monkeypatch):
    # One 20 MB file being cut, or a large publish, moved no counter: the log said nothing for
    # many seconds, and "files 1/1" made the file look done.
    p = Progress()
    monkeypatch.setattr(shown, "STILL_S", 0.05)
    with shown.show(p):
        p.set_stage("extracting")
        p.total("files", 1)
        said = said_until(capsys, 2)
    lines = untimed(said + capsys.readouterr().err)
    assert lines[0] == "extracting"
    assert len(lines) >= 3 and set(lines[1:]) == {
        "extracting: files 0/1; chunks 0 extracted, 0 reused (still working)"}, lines


def test_the_first_stage_gets_a_line_too_when_nothing_moves(capsys, monkeypatch):
    # A scan of a huge tree or a slow mount changes nothing until it ends.
    p = Progress()
    monkeypatch.setattr(shown, "STILL_S", 0.05)
    with shown.show(p):
        said = said_until(capsys, 1)
    lines = untimed(said + capsys.readouterr().err)
    assert lines and set(lines) == {"scanning: files 0/0; chunks 0 extracted, 0 reused (still working)"}, lines


def _no_op_said(capsys, monkeypatch, held_s: float) -> list[str]:
    """The lines off a terminal of a run that finds nothing to redo, its stages held ``held_s``."""
    monkeypatch.setattr(shown, "HELD_S", held_s)
    p = Progress()
    with shown.show(p):
        p.total("files", 2)               # (still scanning)
        p.set_stage("extracting")
        p.nothing_to_redo = True          # (``Indexer._publish_unchanged``)
        for stage in ("merging", "summarizing", "publishing"):
            p.set_stage(stage)
    return untimed(capsys.readouterr().err)


def test_a_run_with_nothing_to_redo_says_no_stage_unless_its_scan_took_time(capsys, monkeypatch):
    # A quick scan that found nothing to redo still said 'scanning' and 'extracting' (said as
    # each began, before the scan knew); held until a stage lasts HELD_S, a slow one is said.
    assert _no_op_said(capsys, monkeypatch, held_s=3600.0) == []
    assert _no_op_said(capsys, monkeypatch, held_s=0.0) == ["scanning", "extracting"]


def test_held_stages_are_said_before_the_next_and_when_a_run_ends(capsys, monkeypatch):
    monkeypatch.setattr(shown, "HELD_S", 3600.0)
    p = Progress()
    with shown.show(p):
        p.total("files", 1)
        p.set_stage("extracting")
        p.set_stage("merging")
    assert untimed(capsys.readouterr().err) == ["scanning", "extracting", "merging"]
    p = Progress()
    with shown.show(p):                   # (a run that fails in its scan: where it was)
        p.total("files", 1)
    assert untimed(capsys.readouterr().err) == ["scanning"]


def _panel_left(capsys, monkeypatch, nothing_to_redo: bool) -> str:
    """What a terminal shows of the panel once a run ends (rich, made to take stderr for a terminal)."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm")
    p = Progress()
    with shown.show(p):
        p.set_stage("extracting")
        p.nothing_to_redo = nothing_to_redo
        p.set_stage("publishing")
    return capsys.readouterr().err


def test_a_run_with_nothing_to_redo_leaves_no_panel_on_a_terminal(capsys, monkeypatch):
    # On a terminal, the panel of a run that changed nothing stayed above "Nothing changed: ..."
    # showing "stage publishing", a stage it did not run; a run that worked keeps its panel.
    kept = _panel_left(capsys, monkeypatch, nothing_to_redo=False)
    erased = _panel_left(capsys, monkeypatch, nothing_to_redo=True)
    assert "publishing" in kept and "publishing" in erased
    assert not kept.rstrip("\r\n").endswith("\x1b[2K")        # the panel stays
    assert erased.endswith("\x1b[1A\x1b[2K"), repr(erased[-80:])   # its lines erased


def test_off_a_terminal_rich_is_not_loaded():
    # rich was loaded (40 ms of CPU) to learn that stderr is no terminal: `index` into a log.
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys\nfrom streamrag import progress\nfrom streamrag.run_progress import Progress\n"
            "p = Progress()\nwith progress.show(p):\n    p.set_stage('publishing')\n"
            "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'rich'))")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)   # (this code, not an installed one)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         stdin=subprocess.DEVNULL)
    assert ran.stdout.strip() == "[]" and untimed(ran.stderr) == ["publishing"], (ran.stdout, ran.stderr)


def test_the_panel_points_to_the_command_that_lists_failures():
    # The panel said "failures 2 (see `streamrag status`)": plain `status` only counts them, and
    # the run's own summary, printed under the panel that stays, names `status --failures`.
    import io

    from rich.console import Console

    p = Progress()
    p.set_stage("publishing")
    p.add("failures", 2)
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(shown._Panel(p, lambda: {}, time.monotonic()))
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("failures"))
    assert "streamrag status --failures" in line, line
