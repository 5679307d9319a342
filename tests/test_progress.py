"""Progress off a terminal: a line per stage, and the counts now and then within a long stage."""

from __future__ import annotations

from streamrag import progress as shown
from streamrag.pipeline import Progress


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
    lines = capsys.readouterr().err.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
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
    assert [line.split("] ", 1)[1] for line in capsys.readouterr().err.splitlines()] == ["extracting"]
