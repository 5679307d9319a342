"""``streamrag demo`` and how it tells its own index from a user's (``demo.is_demos_index``)."""

from __future__ import annotations

import sqlite3


def test_an_unpublished_index_another_command_started_is_no_demo_s(cli_run, corpus, tmp_path):
    """`index notes --db d/index.db` stopped before its first publish (here: the endpoint down)
    left an index with nothing published, which `demo --dir d` took for a demo's and wrote the
    sample into: the user's next run, meant to go on with its finished work, found the demo's
    index. Such an index is refused now; a demo's own, stopped early, is still taken."""
    from streamrag.demo import is_demos_index

    (tmp_path / "d").mkdir()
    db = tmp_path / "d" / "index.db"
    out = cli_run("index", "-q", str(corpus), "--db", str(db), "--api-base", "http://127.0.0.1:9/v1")
    assert out.returncode == 1 and "Nothing was published" in out.stderr, out.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0
        assert [c for (c,) in conn.execute("SELECT command FROM runs")] == ["index"]
    before = db.read_bytes()
    assert not is_demos_index(db)
    out = cli_run("demo", "--dir", str(tmp_path / "d"))
    assert out.returncode == 1 and "holds an index.db that is not a demo's index" in out.stderr, out.stderr
    assert db.read_bytes() == before and not (tmp_path / "d" / "christmas_carol").exists()


def test_a_demo_stopped_before_its_first_publish_is_taken_again_and_finished(cli_run, tmp_path, monkeypatch):
    """A demo's own index with nothing published (a first demo stopped early: here by a SIGTERM
    once its chunks are read and extracted, before anything is published) is a demo's: the next
    `demo --dir d` takes it and finishes; published, it is a demo's still. (6cd9251 made one by
    renaming a user's runs 'demo' in SQL.)"""
    import os
    import signal

    import anyio

    from streamrag import pipeline
    from streamrag.demo import is_demos_index

    streamed = pipeline.Indexer._stream_stage

    async def then_interrupted(self, *args, **kwargs):   # (`kill` of the demo, at this point)
        scan = await streamed(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)   # (taken by until_sigterm, which cancels the run)
        await anyio.sleep_forever()
        return scan

    d = tmp_path / "d"
    with monkeypatch.context() as m:
        m.setattr(pipeline.Indexer, "_stream_stage", then_interrupted)
        out = cli_run("demo", "--dir", str(d))
    assert out.returncode == 128 + signal.SIGTERM and "interrupted" in out.stderr, out.stderr
    db = d / "index.db"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0   # nothing published
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0   # its work kept
        assert [c for (c,) in conn.execute("SELECT command FROM runs")] == ["demo"]
    assert is_demos_index(db)
    done = cli_run("demo", "--dir", str(d))
    assert done.returncode == 0 and "Demo finished" in done.stdout, done.stderr
    assert is_demos_index(db)
