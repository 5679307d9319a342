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
    # A demo's own index, nothing published yet (as one stopped early leaves it), or published, is a demo's.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET command = 'demo'")
    assert is_demos_index(db)
    assert cli_run("demo", "--dir", str(tmp_path / "d")).returncode == 0
    assert is_demos_index(db)
