"""The SQLite store: schema, migrations and the queries every stage shares.

One file holds everything (WAL mode). The layout separates three kinds of rows:

* **Content-addressed work products** (``chunks``, ``extractions``, ``reports``, ``llm_cache``,
  ``embeddings``): keyed by a hash of what produced them, written as soon as they exist, never
  changed (but a chunk's ``tokens`` and ``encoding``, which follow the last encoding that cut it:
  the key is the text alone), and reused by any later run that needs the same thing. This is
  what makes a restart after ``kill -9`` repeat no paid call, and what makes incremental
  updates cheap.
* **The published index** (``files``, ``documents``, ``document_chunks``, ``entities``,
  ``relationships``, ``entity_sources``, ``relationship_sources``, ``claims``, ``communities``,
  ``community_members``, ``meta.version``): replaced only inside one ``publish`` transaction, so a
  reader that reads inside ``snapshot()`` sees one version, never a graph of one version with the
  reports of another.
* **Accounting** (``runs``, ``llm_calls``, ``failures``): appended as things happen; those
  older than ``store.keep_unused_days`` are folded into sums (``index_rows.prune``).

Migrations are an append-only list: a mistake in what a step made gets a new fix-up step. A
step's code is edited only where the index the upgrade leaves is the same: the steps that make
the triggers of ``failure_keys`` make them as ``_FAILURE_KEY_TRIGGERS`` says them now (every
upgrade ends with them so), and two of them no longer make its keys each, which the upgrade
makes once as its last step ends (``Store.migrate``). The steps after the first two may be
applied again to an index that has them (tables, indexes and columns made only if not there,
triggers and counts made again), as tests do that set an index's version back a step. Each
step commits with its version, so an upgrade stopped anywhere is finished by the next open. A
reader that cannot write an older index reads it as it lies only where every step it lacks proves
it would change no row of it (``_NO_OP_WHEN``) and its failure keys are not marked stale (the last
step would count them again); so does ``index --estimate``, which writes nothing
(``reader_in_place``; else it reads an upgraded copy). An upgrade made under the writer lock its
process holds (``index``, ``watch``, ``demo``, ``vacuum``: a reader of theirs too, the lock being
its own) says "upgrading" in the lock from the moment the lock is taken (``upgrading_note``), for
readers and writers that meet it; one made by a process that holds none (``ask``, ``status``) says
nothing there.
Writers go through ``writer.Writer`` (one task owns the write connection); readers open their own
``Store(path, readonly=True)``.

What `status` counts as failures "recorded over all runs" is ruled here, though
``index_rows.failures_recorded`` reads the count: the count is kept as failures are written, by
triggers (``failure_keys``), and triggers are schema, made by the migrations below. The rules have
two texts: over every row (``FAILURE_KEY``, ``COUNTED_RUN``, ``UNINDEXED_RUNS``,
``UNINDEXED_FILES``: a rebuild, ``count_failure_keys``, and the reads of the runs under way), and
per failure for the triggers, which may hold no WITH clause (``_ended_failure``,
``_run_unindexed``). They can drift apart: they are side by side here so that a change of one is
made in the other, and tests/test_status compares the kept count with one read from every row at
each step of writing, editing, deleting and pruning. index_rows imports this module, not the other
way round.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import sqlite3
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from streamrag.errors import IndexMissingError, StoreBusyError, StoreError, StreamragError, WriterBusyError, disk_full
from streamrag.terms import INVISIBLE, fts_text
from streamrag.terminal import one_line, shell_word, shown

log = logging.getLogger(__name__)

_BUSY_S = 30   # how long a write waits for another process's write lock before giving up


def _fts_invisible(conn: sqlite3.Connection) -> None:
    """The full-text rows of texts with invisible characters inside words (``terms.INVISIBLE``:
    zero-width spaces and joiners, direction marks, soft hyphen ...), which ``terms.words`` now
    leaves out: made again, or such a word (Sinhala's ශ්‍රී, Persian written with ZWNJ) was no
    longer found."""
    invisible = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in INVISIBLE) + "]")
    for fts, columns, values, rows in (
            ("chunks_fts", "id, text", "id, fts_text(text) FROM chunks",
             "SELECT f.id, c.text FROM chunks_fts f JOIN chunks c ON c.id = f.id"),
            ("entities_fts", "id, name, description", "id, fts_text(name), fts_text(description) FROM entities",
             "SELECT id, name || ' ' || description FROM entities")):
        ids = [i for i, text in conn.execute(rows) if invisible.search(text)]
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            marks = ",".join("?" * len(part))
            conn.execute(f"DELETE FROM {fts} WHERE id IN ({marks})", part)
            conn.execute(f"INSERT INTO {fts}({columns}) SELECT {values} WHERE id IN ({marks})", part)


def _fts_words(conn: sqlite3.Connection) -> None:
    """The full-text tables hold the words of a text (``terms.fts_text``: accents folded, Indic
    words whole, text in scripts written without spaces as pairs of characters), and their
    tokenizer keeps the marks inside words, which it took for separators: the Thai pair ที่ was
    no token at all, and an Indic word a run of bare consonants."""
    conn.execute("DROP TABLE chunks_fts")
    conn.execute("DROP TABLE entities_fts")
    tokenizer = "unicode61 categories 'L* N* Co M*'"
    try:
        conn.execute("CREATE VIRTUAL TABLE fts_probe USING fts5(text, tokenize = \"" + tokenizer + "\")")
        conn.execute("DROP TABLE fts_probe")
    except sqlite3.OperationalError:   # an SQLite before 3.25 has no categories: marks part words
        tokenizer = "unicode61"
    conn.execute(f"CREATE VIRTUAL TABLE chunks_fts USING fts5(id UNINDEXED, text, tokenize = \"{tokenizer}\")")
    conn.execute(f"CREATE VIRTUAL TABLE entities_fts USING fts5(id UNINDEXED, name, description, "
                 f"tokenize = \"{tokenizer}\")")
    # The chunks the index is built from (a row missing from the old table is found again).
    conn.execute("INSERT INTO chunks_fts(id, text) SELECT id, fts_text(text) FROM chunks "
                 "WHERE id IN (SELECT chunk_id FROM live_chunks)")
    conn.execute("INSERT INTO entities_fts(id, name, description) "
                 "SELECT id, fts_text(name), fts_text(description) FROM entities")


def _add_column(conn: sqlite3.Connection, table: str, column: str, decl: str) -> None:
    """``ALTER TABLE table ADD COLUMN column decl`` where the table has no such column yet: a
    migration that adds columns may be applied again (an index brought back to an older schema
    to be upgraded once more keeps the columns it has)."""
    if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


def _failures_stamp(conn: sqlite3.Connection) -> None:
    """``failures.stamp``, and an index to find a file's last failure to read by."""
    _add_column(conn, "failures", "stamp", "TEXT")
    # (partial: a file's last failure to read is found among those alone; over (stage, item) the
    # lookup read every failure's row, 0.2 s at 400,000 failures, now 0.03 s)
    conn.execute("DROP INDEX IF EXISTS failures_item")
    conn.execute("CREATE INDEX IF NOT EXISTS failures_read ON failures(item) WHERE stage = 'load' AND stamp IS NOT NULL")


def _failures_kind(conn: sqlite3.Connection) -> None:
    """``failures.kind``."""
    _add_column(conn, "failures", "kind", "TEXT")


# The messages of the load failures of each kind, as every streamrag has written them (the
# file's or folder's path before them): errors.NotText's two, UnreadableFile's (and the scan's,
# of a file it could not look at), and the scan's of a folder it could not list.
_KIND_SAID = (("not_text", ("%: binary file, not indexed%", "%: a .% file is not plain text, not indexed%")),
              ("unreadable", ("%: cannot read (%",)),
              ("unlisted", ("%: cannot list the folder (%",)))


def _failures_kind_inferred(conn: sqlite3.Connection) -> None:
    """The kind of a load failure recorded before ``failures.kind``, told by its message where
    that says it; others stay NULL ("could not be used", and read again once for their kind)."""
    for kind, patterns in _KIND_SAID:
        said = " OR ".join("message LIKE ?" for _ in patterns)
        conn.execute(f"UPDATE failures SET kind = ? WHERE stage = 'load' AND kind IS NULL AND ({said})",
                     (kind, *patterns))


# The load failures of files over index.max_file_mb recorded before they had a kind of their own
# (``loader.TooBig``: recorded "unusable", told apart by their line), by their line as every
# streamrag has written it: "<file>: 2.5 MB, over index.max_file_mb (1), not indexed; set
# index.max_file_mb = 3 (or 0: no limit) to index it, or add it to index.exclude".
# A reader of an index that lacks the step reads them as "too_big" all the same (``TOO_BIG_UNKINDED_IF``).
TOO_BIG_UNKINDED_IF = ("stage = 'load' AND coalesce(kind, 'unusable') = 'unusable' "
                       "AND message LIKE '%, over index.max_file_mb (%), not indexed; set index.max_file_mb = %'")
_TOO_BIG_UNKINDED = f"FROM failures WHERE {TOO_BIG_UNKINDED_IF}"


def _failures_too_big(conn: sqlite3.Connection) -> None:
    """``_TOO_BIG_UNKINDED`` made "too_big"."""
    conn.execute(f"UPDATE failures SET kind = 'too_big' WHERE rowid IN (SELECT rowid {_TOO_BIG_UNKINDED})")


# The failed checks of a model by name recorded before ``llm_calls.apart`` that cannot have been
# the model refused (``LLMClient._refusal_by_name``: a refusal is an HTTP 400, 404 or 422, its
# error "<url>: HTTP 404: ..."): no answer, a page or an error object sent with 200, a 5xx. A 400,
# 404 or 422 may have been either, and stays counted among the errors, as it was.
_CHECKS_APART = ("FROM llm_calls WHERE stage = 'model_check' AND error IS NOT NULL AND cancelled = 0 "
                 "AND error NOT LIKE '%: HTTP 400%' AND error NOT LIKE '%: HTTP 404%' "
                 "AND error NOT LIKE '%: HTTP 422%'")


def _calls_apart(conn: sqlite3.Connection) -> None:
    """``llm_calls.apart`` (a column added in place: no row written again), ``_CHECKS_APART``
    marked so, and an index of those rows alone, from which `status` takes them off the usage
    (``index_rows._usage_by_model``). ``llm_calls_usage`` and ``llm_calls_failed`` made again
    with the column, for that, held the index's write lock 2.3 s of the upgrade of 200,000 calls
    (a 2-core machine under load); 0.17 s with this index."""
    _add_column(conn, "llm_calls", "apart", "INTEGER NOT NULL DEFAULT 0")
    conn.execute(f"UPDATE llm_calls SET apart = 1 WHERE rowid IN (SELECT rowid {_CHECKS_APART})")
    conn.execute("CREATE INDEX IF NOT EXISTS llm_calls_apart ON llm_calls(stage, model, cached, cancelled, error, "
                 "apart) WHERE apart = 1")


def _cache_packed(conn: sqlite3.Connection) -> None:
    """Nothing to change: rows stored as text are read as they were. The step marks an index
    that may hold compressed answers and packed vectors (``answer_cache.pack``, ``pack_vector``),
    which an older streamrag would take for rows it cannot read and pay for again: it refuses
    the index instead."""


def _runs_update_of(conn: sqlite3.Connection) -> None:
    """``runs.update_of``."""
    _add_column(conn, "runs", "update_of", "TEXT")


def _runs_process(conn: sqlite3.Connection) -> None:
    """``runs.pid`` and ``runs.process``."""
    _add_column(conn, "runs", "pid", "INTEGER")
    _add_column(conn, "runs", "process", "TEXT")


def _calls_cancelled(conn: sqlite3.Connection) -> None:
    """``cancelled`` in ``llm_calls`` and its sums."""
    for table in ("llm_calls", "llm_usage_archive"):
        _add_column(conn, table, "cancelled", "INTEGER NOT NULL DEFAULT 0")


def _calls_given_up_failed(conn: sqlite3.Connection) -> None:
    """The calls a client gave up on, every try of its endpoint failing, recorded as cancelled
    (``endpoint_health.GAVE_UP``): failed, as the lines of the run that made them said."""
    conn.execute("UPDATE llm_calls SET cancelled = 0 WHERE cancelled = 1 AND error LIKE ?",
                 ("%: the client gave up: %",))


def _archive_answered(conn: sqlite3.Connection) -> None:
    """The paid calls' sums of ``llm_usage_archive`` for those answered usably alone. Rows
    archived before count none: their sums hold the unusable answers' and cancelled calls'
    tokens too, not to be measured as answers."""
    for column in ("answered_paid", "answered_prompt_tokens", "answered_completion_tokens"):
        _add_column(conn, "llm_usage_archive", column, "INTEGER NOT NULL DEFAULT 0")


def _runs_taking(conn: sqlite3.Connection) -> None:
    """``runs.taking``."""
    _add_column(conn, "runs", "taking", "TEXT")


def _runs_kind(conn: sqlite3.Connection) -> None:
    """``runs.kind``: NULL on a row recorded before, whose kind is not known."""
    _add_column(conn, "runs", "kind", "TEXT")


def _extraction_checks(conn: sqlite3.Connection) -> None:
    """``extractions.checks``: NULL on a row stored before, whose checks are not known."""
    _add_column(conn, "extractions", "checks", "INTEGER")


def _chunks_encoding(conn: sqlite3.Connection) -> None:
    """``chunks.encoding``: NULL on a row stored before, whose count may be another encoding's."""
    _add_column(conn, "chunks", "encoding", "TEXT")


# The chunks ``_chunks_counted`` counts: of no recorded encoding, and used by a document.
_UNCOUNTED = "FROM chunks WHERE encoding IS NULL AND id IN (SELECT chunk_id FROM document_chunks)"


def _chunks_counted(conn: sqlite3.Connection) -> None:
    """The chunks of no recorded encoding that a document uses counted again, in the encoding
    the index records (``chunker_settings``' index.encoding; the default o200k_base if none),
    and marked so.

    Their count cannot be marked as that encoding's without a count: it is the first encoding's
    that cut the text (rows were kept, not replaced, before ``chunks.encoding``), and an index
    records only its last encoding, so an index that ever changed index.encoding holds counts
    of the other one for the texts both cut alike (a document of one chunk).

    A chunk no document uses (cut by a run that published nothing; the next publish deletes it)
    is left NULL: every reader of a count finds chunks through ``document_chunks``
    (``index_rows.backlog``, ``chunks_of``) or takes only counts marked its encoding's
    (``chunk_tokens``: a basic ask, of published chunks), and a run that cuts that text again
    stores its count (``save_chunks`` replaces a NULL one)."""
    missing = [i for (i,) in conn.execute(f"SELECT id {_UNCOUNTED}")]
    if not missing:   # (``_NO_OP_WHEN`` proves a reader may read on by this return)
        return
    from streamrag.tokens import SHIPPED, count_uncached   # (its tokenizer built only here)

    row = conn.execute("SELECT value FROM meta WHERE key = 'chunker_settings'").fetchone()
    try:
        recorded = json.loads(row[0]).get("index.encoding") if row else None
    except (ValueError, AttributeError):
        recorded = None
    encoding = recorded if recorded in SHIPPED else "o200k_base"
    for at in range(0, len(missing), 500):
        part = missing[at:at + 500]
        texts = conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(part))})", part)
        conn.executemany("UPDATE chunks SET tokens = ?, encoding = ? WHERE id = ?",
                         [(count_uncached(text, encoding), encoding, chunk_id) for chunk_id, text in texts.fetchall()])


# What `status` counts "recorded over all runs" (``index_rows.failures_recorded``), defined here
# for the count kept as failures are written (``failure_keys``). A failure ``f`` (its run ``r``)
# counts once per key: an item once per update (``runs.update_of``), a file that could not be
# used once per version of it (its ``stamp``), whatever runs named it.
def _failure_key(f: str = "f", r: str = "r") -> str:
    return (f"json_array(CASE WHEN {f}.stamp IS NULL THEN coalesce({r}.update_of, {f}.run_id) END, "
            f"{f}.stage, {f}.item, {f}.stamp)")


FAILURE_KEY = _failure_key()
# ... and none of a daemon's extraction ahead of a sync, whose failures the sync after it meets again.
COUNTED_RUN = "(r.command IS NULL OR r.command != 'watch:extract')"
# The runs that published nothing and left files unindexed (``not_indexed``), with their stats:
# each one's stats parsed here, once, not once per failure row (SQLite before 3.45 keeps no
# parsed JSON: a count over every run's failures parsed a run's stats for each of its chunks').
UNINDEXED_RUNS = ("unindexed_runs(id, stats) AS (SELECT id, stats FROM runs WHERE status != 'ok' "
                  "AND json_valid(stats) AND coalesce(json_extract(stats, '$.not_indexed'), 0) > 0)")
# A failure ``f`` of a chunk of a file such a run left unindexed: one of the chunks its stats name
# (``not_indexed_chunks``), or any of a run recorded before they were named. (A chunk of an
# unchanged file, extracted again for another extraction model, is no chunk of the files a run
# leaves unindexed: a failure.) Each list is made once for the whole count; the pairs as one
# key, a JSON array of the two, looked up in it: a row value, ``(f.run_id, f.item) IN (...)``,
# was looked up by a scan per failure (56 s, not 0.4 s, over 200,000 failures), and a join of
# the pairs made into a table took 1.1 s. (They were "run item" strings: run "r 1"'s failure of
# "c" taken for a failure of chunk "1 c" of run "r".) Only a failure of such a run has its pair
# made and looked up: the pair of every chunk's failure of every run was (of 200,000 failures,
# 400 runs, 10 of them such: 0.19 s of CPU a `status`, 0.15 now; 2,000 watch runs: 0.16, 0.13).
# A failure of no run is none of them (SQL's NULL made it unknown, and it was not counted at all).
UNINDEXED_FILES = ("(f.run_id IS NOT NULL AND f.run_id IN (SELECT id FROM unindexed_runs) AND (f.run_id IN "
                   "(SELECT id FROM unindexed_runs WHERE json_type(stats, '$.not_indexed_chunks') IS NULL) OR json_array(f.run_id, f.item) IN "
                   "(SELECT json_array(u.id, j.value) FROM unindexed_runs u, "
                   "json_each(u.stats, '$.not_indexed_chunks') j)))")


def _ended_failure(f: str, r: str, stats: str, once: str | None = None) -> str:
    """Whether failure ``f`` of a run ``r`` that has ended (or is gone) counts, as
    ``UNINDEXED_FILES`` says of one failure: SQL of the trigger that keeps ``failure_keys``
    (which may not hold a WITH clause). ``stats``: ``r``'s; ``once``: the name of
    ``_run_unindexed``'s row of them when the caller reads it, so that the stats are parsed once
    for all the run's failures. (Read per failure, the JSON functions beside ``json_each`` parsed
    them for every failure, SQLite 3.40: a run's end with 20,000 failures of chunks it left
    unindexed took 2.6 s, 40,000 some 10 s, under the write lock; now 0.08 s, 0.2 s.)"""
    if once is None:
        return (f"({r}.command IS NULL OR {r}.command != 'watch:extract') AND NOT ({f}.stage IN ('extract', 'glean') "
                f"AND CASE WHEN {r}.status != 'ok' AND json_valid({stats}) THEN coalesce(json_extract({stats}, "
                f"'$.not_indexed'), 0) > 0 AND (json_type({stats}, '$.not_indexed_chunks') IS NULL OR {f}.item IN "
                f"(SELECT value FROM json_each({stats}, '$.not_indexed_chunks'))) ELSE 0 END)")
    return (f"({r}.command IS NULL OR {r}.command != 'watch:extract') AND NOT ({f}.stage IN ('extract', 'glean') "
            f"AND ({once}.every OR {once}.named AND {f}.item IN (SELECT value FROM json_each(CASE WHEN "
            f"json_valid({stats}) THEN {stats} END, '$.not_indexed_chunks'))))")


def _run_unindexed(r: str, stats: str, name: str) -> str:
    """A row, ``name``, of what run ``r``'s ``stats`` say of the files it left unindexed, read once:
    ``every`` failure of its chunks is of them (a run before ``not_indexed_chunks``), or those
    ``named`` there are."""
    def left(chunks: str) -> str:
        return (f"CASE WHEN {r}.status != 'ok' AND json_valid({stats}) THEN coalesce(json_extract({stats}, "
                f"'$.not_indexed'), 0) > 0 AND json_type({stats}, '$.not_indexed_chunks') {chunks} ELSE 0 END")
    return f"(SELECT {left('IS NULL')} AS every, {left('IS NOT NULL')} AS named) {name}"


_STALE = ("INSERT OR REPLACE INTO meta(key, value) SELECT 'failure_keys_stale', '1' "
          "WHERE NOT EXISTS (SELECT 1 FROM meta WHERE key = 'failure_keys_stale')")

# The triggers that keep ``failure_keys``: a failure of a run that has ended (or of none left)
# adds its key as it is written; a run's end adds the keys of its failures. Each adds to the count
# of the keys kept (``failure_keys_count``) the keys it added (``changes()``: of the statement
# before it in the trigger). A key there already is left out by the SELECT (``_new_keys``), not
# only by OR IGNORE: a statement's conflict policy gives way to an outer one's, and an outer INSERT
# OR REPLACE into failures or runs made it replace the key, counted as added. Any other change of
# what a key is (a run's row edited or deleted, a failure deleted: ``index_rows.prune``) marks the
# table stale, which ``count_failure_keys`` makes again (and ``failures_recorded`` reads
# around meanwhile).
_COUNTED = "UPDATE failure_keys_count SET n = n + changes()"


def _new_keys(select: str) -> str:
    """The keys ``select`` makes (as ``key``) that ``failure_keys`` has not, added to it."""
    return (f"INSERT OR IGNORE INTO failure_keys(key) SELECT key FROM ({select}) "
            "WHERE key NOT IN (SELECT key FROM failure_keys)")


_FAILURE_KEY_TRIGGERS = (
    ("failure_keys_failure", "AFTER INSERT ON failures WHEN new.run_id IS NOT NULL AND "
     "coalesce((SELECT status FROM runs WHERE id = new.run_id), '') != 'running' BEGIN "
     + _new_keys(f"SELECT {_failure_key('new', 'r')} AS key FROM (SELECT 1) LEFT JOIN runs r "
                 f"ON r.id = new.run_id WHERE {_ended_failure('new', 'r', 'r.stats')}") + f"; {_COUNTED}; END"),
    ("failure_keys_ended", "AFTER UPDATE OF status ON runs WHEN old.status = 'running' AND new.status != 'running' "
     "BEGIN " + _new_keys(f"SELECT DISTINCT {_failure_key('f', 'new')} AS key FROM "
                          f"{_run_unindexed('new', 'new.stats', 'u')} CROSS JOIN failures f "
                          f"WHERE f.run_id = new.id AND {_ended_failure('f', 'new', 'new.stats', 'u')}")
     + f"; {_COUNTED}; END"),
    ("failure_keys_run", "AFTER INSERT ON runs WHEN new.status != 'running' BEGIN "
     + _new_keys(f"SELECT DISTINCT {_failure_key('f', 'new')} AS key FROM {_run_unindexed('new', 'new.stats', 'u')} "
                 f"CROSS JOIN failures f WHERE f.run_id = new.id AND {_ended_failure('f', 'new', 'new.stats', 'u')}")
     + f"; {_COUNTED}; END"),
    # (an ended run's status changed to another end, 'failed' to 'ok', changes whether its
    # failures of files it left unindexed count: ``UNINDEXED_RUNS``)
    ("failure_keys_run_changed", "AFTER UPDATE OF id, command, status, stats, update_of ON runs WHEN "
     "old.status != 'running' AND (new.status IS NOT old.status OR new.id IS NOT old.id OR new.command IS NOT "
     f"old.command OR new.stats IS NOT old.stats OR new.update_of IS NOT old.update_of) BEGIN {_STALE}; END"),
    ("failure_keys_run_deleted", f"AFTER DELETE ON runs BEGIN {_STALE}; END"),
    ("failure_keys_failure_changed", f"AFTER UPDATE OF run_id, stage, item, stamp ON failures BEGIN {_STALE}; END"),
    ("failure_keys_failure_deleted", f"AFTER DELETE ON failures BEGIN {_STALE}; END"),
)


def count_failure_keys(conn: sqlite3.Connection) -> None:
    """``failure_keys`` made again from every failure of a run that has ended (or of none left),
    and their count (``failure_keys_count``)."""
    conn.execute("DELETE FROM failure_keys_count")
    conn.execute("DELETE FROM failure_keys")
    conn.execute(f"WITH {UNINDEXED_RUNS} INSERT INTO failure_keys(key) SELECT DISTINCT {FAILURE_KEY} "
                 "FROM failures f LEFT JOIN runs r ON r.id = f.run_id WHERE f.run_id IS NOT NULL AND "
                 f"(r.status IS NULL OR r.status != 'running') AND {COUNTED_RUN} AND NOT "
                 f"(f.stage IN ('extract', 'glean') AND {UNINDEXED_FILES})")
    # (the keys the statement before made: sqlite3's rowcount says -1 of an INSERT after WITH)
    conn.execute("INSERT INTO failure_keys_count(n) SELECT changes()")
    conn.execute("DELETE FROM meta WHERE key = 'failure_keys_stale'")


def _failure_keys(conn: sqlite3.Connection) -> None:
    """``failure_keys`` and its triggers; its keys are made once the upgrade is done
    (``_failure_key_triggers``)."""
    conn.execute("CREATE TABLE IF NOT EXISTS failure_keys (key TEXT PRIMARY KEY) WITHOUT ROWID")
    _failure_key_triggers(conn)


def _failure_key_triggers(conn: sqlite3.Connection) -> None:
    """The triggers of ``failure_keys`` as ``_FAILURE_KEY_TRIGGERS`` says them now, and the table
    marked stale: its keys (those the triggers before may have missed) are made again once, as the
    upgrade ends (``Store.migrate``). Each step that changed the triggers made them again itself:
    an index upgraded from before ``failure_keys`` made them twice (1.3 s each at 200,000 failures)."""
    _made_failure_key_triggers(conn)
    conn.execute(_STALE)


def _made_failure_key_triggers(conn: sqlite3.Connection) -> None:
    """The triggers of ``_FAILURE_KEY_TRIGGERS``, and the table of the count they keep: made by
    the first step that makes them, so that no trigger names a table not there yet while the
    steps between run."""
    conn.execute("CREATE TABLE IF NOT EXISTS failure_keys_count (n INTEGER NOT NULL)")
    for name, body in _FAILURE_KEY_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute(f"CREATE TRIGGER {name} {body}")


def _failure_keys_count(conn: sqlite3.Connection) -> None:
    """``failure_keys_count``, the count of ``failure_keys`` (one row), kept by its triggers: the
    keys counted once (not made again: an index of the step before keeps them right; those a step
    of this upgrade marked stale are made again, and counted, as it ends)."""
    _made_failure_key_triggers(conn)
    conn.execute("DELETE FROM failure_keys_count")
    conn.execute("INSERT INTO failure_keys_count(n) SELECT count(*) FROM failure_keys")



MIGRATIONS: list[tuple[str, str | Callable[[sqlite3.Connection], None]]] = [
    ("initial", """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE files (
    path TEXT PRIMARY KEY,          -- as given, relative to the indexed root when possible
    doc_id TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL
);
CREATE INDEX files_doc ON files(doc_id);

CREATE TABLE documents (
    id TEXT PRIMARY KEY,            -- doc-<hash of text>
    title TEXT NOT NULL,
    path TEXT NOT NULL,             -- one of the paths holding this text
    tokens INTEGER NOT NULL,
    chars INTEGER NOT NULL
);

CREATE TABLE chunks (
    id TEXT PRIMARY KEY,            -- chk-<hash of text>
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL
);

CREATE TABLE document_chunks (
    doc_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    chunk_id TEXT NOT NULL,
    PRIMARY KEY (doc_id, idx)
);
CREATE INDEX document_chunks_chunk ON document_chunks(chunk_id);

CREATE TABLE live_chunks (          -- chunks whose extractions the published graph includes
    chunk_id TEXT PRIMARY KEY,
    extractor TEXT NOT NULL
);

CREATE TABLE extractions (
    chunk_id TEXT NOT NULL,
    extractor TEXT NOT NULL,        -- hash of everything that changes the result
    result TEXT NOT NULL,           -- JSON: {"entities": [...], "relationships": [...], "claims": [...]}
    dropped INTEGER NOT NULL DEFAULT 0,
    rounds INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    PRIMARY KEY (chunk_id, extractor)
);

CREATE TABLE entities (
    id TEXT PRIMARY KEY,            -- ent-<hash of normalized name>
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    description TEXT NOT NULL,      -- summary of the sources' descriptions
    mentions INTEGER NOT NULL,      -- distinct chunks that mention it
    degree INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE entity_sources (       -- provenance: which chunk said what about an entity
    entity_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    name TEXT NOT NULL,             -- as the chunk wrote it
    type TEXT NOT NULL,
    description TEXT NOT NULL,
    PRIMARY KEY (entity_id, chunk_id, description)
);
CREATE INDEX entity_sources_chunk ON entity_sources(chunk_id);

CREATE TABLE relationships (
    id TEXT PRIMARY KEY,            -- rel-<hash of the unordered entity pair>
    source TEXT NOT NULL,           -- entity ids, source < target
    target TEXT NOT NULL,
    description TEXT NOT NULL,
    weight REAL NOT NULL,
    mentions INTEGER NOT NULL,
    combined_degree INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX relationships_source ON relationships(source);
CREATE INDEX relationships_target ON relationships(target);

CREATE TABLE relationship_sources (
    relationship_id TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    description TEXT NOT NULL,
    strength REAL NOT NULL,
    PRIMARY KEY (relationship_id, chunk_id, description)
);
CREATE INDEX relationship_sources_chunk ON relationship_sources(chunk_id);

CREATE TABLE claims (
    id TEXT PRIMARY KEY,
    subject_id TEXT NOT NULL,
    object_id TEXT,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    start_date TEXT,
    end_date TEXT,
    description TEXT NOT NULL,
    source_text TEXT NOT NULL,
    chunk_id TEXT NOT NULL
);
CREATE INDEX claims_subject ON claims(subject_id);

CREATE TABLE communities (
    id TEXT PRIMARY KEY,            -- stable across updates: C<n>
    level INTEGER NOT NULL,
    parent TEXT,                    -- community id one level up, NULL at level 0
    size INTEGER NOT NULL,
    context_key TEXT NOT NULL,      -- hash of the report input as the community now stands
    report_key TEXT                 -- the report shown for it (may lag context_key by choice)
);
CREATE INDEX communities_parent ON communities(parent);

CREATE TABLE community_members (
    community_id TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    PRIMARY KEY (community_id, entity_id)
);
CREATE INDEX community_members_entity ON community_members(entity_id);

CREATE TABLE reports (
    key TEXT PRIMARY KEY,           -- hash of the context, prompt and model that produced it
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    rating REAL NOT NULL,
    rating_explanation TEXT NOT NULL,
    findings TEXT NOT NULL,         -- JSON list of {summary, explanation, entities, relationships}
    text TEXT NOT NULL,             -- the report as Markdown, what queries read
    tokens INTEGER NOT NULL,
    elements TEXT NOT NULL,         -- JSON: ids of entities, relationships, child reports used
    extractive INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);

CREATE TABLE embeddings (
    kind TEXT NOT NULL,             -- entity | chunk (report: made by older builds, dropped at publish)
    item_id TEXT NOT NULL,
    model TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,           -- float32 little endian
    PRIMARY KEY (kind, item_id, model)
);

CREATE TABLE llm_cache (
    key TEXT PRIMARY KEY,           -- versioned hash of model, messages, options, prompt name/version
    model TEXT NOT NULL,
    response TEXT NOT NULL,         -- JSON of the provider's answer
    created_at REAL NOT NULL
);

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    command TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,           -- running | ok | interrupted | failed
    stats TEXT
);

CREATE TABLE llm_calls (
    id INTEGER PRIMARY KEY,
    run_id TEXT,
    stage TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,           -- prompt name
    prompt_version TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_ms REAL NOT NULL,
    cached INTEGER NOT NULL,
    error TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX llm_calls_run ON llm_calls(run_id);

CREATE TABLE failures (
    id INTEGER PRIMARY KEY,
    run_id TEXT,
    stage TEXT NOT NULL,
    item TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at REAL NOT NULL
);

CREATE VIRTUAL TABLE entities_fts USING fts5(id UNINDEXED, name, description);
CREATE VIRTUAL TABLE chunks_fts USING fts5(id UNINDEXED, text);
"""),
    # A file rewritten with its old modification time kept (cp -p, rsync -t) still changes its
    # status-change time: the unchanged-file check compares the later of the two.
    ("files_stamp", """
ALTER TABLE files RENAME COLUMN mtime TO stamp;
"""),
    ("fts_words", _fts_words),
    # What calls older than store.keep_unused_days added up to, by stage and model: their rows
    # are folded in here (``index_rows.prune``), so `status` counts them still.
    ("llm_usage_archive", """
CREATE TABLE IF NOT EXISTS llm_usage_archive (
    stage TEXT NOT NULL,
    model TEXT NOT NULL,
    calls INTEGER NOT NULL,
    cached INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,       -- paid for (cache hits' not counted), as status counts
    completion_tokens INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    PRIMARY KEY (stage, model)
);
"""),
    # The model answer (its key in llm_cache) each summary and report in the index is, so that
    # ``index_rows.prune`` keeps them however old, and dates one that leaves from then.
    ("answers", """
CREATE TABLE IF NOT EXISTS answers (
    owner TEXT PRIMARY KEY,         -- an entity or relationship id, or a report's key
    key TEXT NOT NULL
);
"""),
    # (An index built on one day's development code has the table of the step above under an
    # earlier name.)
    ("answers_again", """
CREATE TABLE IF NOT EXISTS answers (
    owner TEXT PRIMARY KEY,
    key TEXT NOT NULL
);
DROP TABLE IF EXISTS summary_answers;
"""),
    ("fts_invisible", _fts_invisible),
    # The size and change stamp of a file that could not be read, on its failure ("4096 1733390000.5"):
    # an update that finds it unchanged names it again without reading it, and `status` counts
    # the failure once, not once per update (a watched binary file counted once per sync).
    ("failures_stamp", _failures_stamp),
    # A call its caller cancelled after it sent a request (a run that gave up, Ctrl-C): recorded,
    # and counted apart from the calls that failed (``call_log.CallLog.cancelled``).
    ("llm_calls_cancelled", _calls_cancelled),
    # What the archived calls answered usably paid for, apart (``index_rows.call_history``
    # measures an estimate's ratios on them: a report cut off at its budget is not an answer's length).
    ("llm_usage_archive_answered", _archive_answered),
    # What kind of file (or folder) a load failure is of (``errors.InputError.kind``: "unreadable",
    # "not_text", "unlisted", "unusable"; NULL for every other stage's, and for a load failure
    # recorded before): `status` said a binary file and a folder it could not list "could not
    # be read"; and one the system would not read is read again, though its stamp is unchanged.
    ("failures_kind", _failures_kind),
    # The gleaning checks an extraction asked (``records.Extraction.checks``): the estimate
    # measures how many of the chunks that stopped gleaning were checked once more on the
    # extractions it measures their rounds on (``index_rows.gleanings_stopped``), not on every
    # check of the model's history, whose runs may have gleaned under other settings.
    ("extractions_checks", _extraction_checks),
    # The update a daemon's sync goes on with (the id of its first run; NULL: the run is its own
    # update): a sync after one that left items missing (a retry, through an outage, or one for
    # edits meanwhile) asks for them again, and `status` counts an item once per update, not once
    # per retry ("2 in the last update (8 recorded over all runs)" after four retries of an outage).
    ("runs_update_of", _runs_update_of),
    # The kind of the load failures recorded before failures.kind, where their message tells it:
    # `status` said a binary file of such an index "could not be used" until the next update.
    ("failures_kind_inferred", _failures_kind_inferred),
    # The process a run is made by (its pid, and when it started: ``process_stamp``), for
    # `status` to tell a run under way from one killed where no lock tells: an `ask` takes no
    # writer lock, and one killed with -9 left its row "running" for good.
    ("runs_process", _runs_process),
    # The calls a client gave up on were recorded as cancelled, and `status` said "errors 0" of
    # them while the error lines of `watch` counted them as failed. (Those already folded into
    # llm_usage_archive stay counted as cancelled: its sums do not tell them apart.)
    ("calls_given_up_failed", _calls_given_up_failed),
    # A cached answer of 200 bytes of JSON or more is stored zlib-compressed, a blob marked as
    # such (``answer_cache.pack``): a third of the size. A watched folder's index grew some
    # 60 KB per change by its cached answers alone, kept store.keep_unused_days. A cached
    # embedding is stored as float32s (``pack_vector``): a fifth of its JSON, kept for good.
    ("llm_cache_packed", _cache_packed),
    # The failures by run: `status` counts and lists the last update's (``index_rows.failures_of``,
    # ``index_rows.run_failures``) and a daemon reads its sync's after each that had any
    # (``index_rows.failed_chunks``), each read a scan of every run's without it (5 ms a read
    # at 100,000 rows, several of them a `status`; 0.03 ms with it).
    ("failures_run", "CREATE INDEX IF NOT EXISTS failures_run ON failures(run_id)"),
    # The claims and vectors of the chunks (and entities) a publish removes, found by an index
    # (``index_rows.delete_in``): each 500 of them was a scan of every claim and every vector
    # (given 3 claims a chunk and a vector for each chunk and entity, a file's removal from an
    # index of 3,000 documents: 17 ms, now 0.5; a 25 MB file's 6,900 chunks: 0.24 s, now 0.09).
    ("claims_chunk_embeddings_item", """
CREATE INDEX IF NOT EXISTS claims_chunk ON claims(chunk_id);
CREATE INDEX IF NOT EXISTS embeddings_item ON embeddings(item_id);
"""),
    # The relationships by their two ends, with their weights: a local ask reads the graph in
    # its order from this index alone (``local_search.GRAPH_EDGES``), not every row of the table
    # sorted again after it (202,659 of an offline index of 10,000 documents). It stands for
    # the index on source alone, whose searches it serves, so an update writes no more than
    # before (the 4,718 relationships of three hubs rewritten: 0.11 s of CPU either way, 0.15 s
    # with both indexes); on that index it takes 12 MB where that one took 6.5, made in 0.3 s.
    ("relationships_pair", """
CREATE INDEX IF NOT EXISTS relationships_pair ON relationships(source, target, weight);
DROP INDEX IF EXISTS relationships_source;
"""),
    # Where each chunk of a big document lies in its text, and a digest of that part
    # (``records.Spans``): a changed version of the file is cut again from its change on, the
    # chunks before it kept (``chunker.cut_document``), not cut again from its start.
    ("chunk_spans", """
CREATE TABLE IF NOT EXISTS chunk_spans (
    doc_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    digest BLOB NOT NULL,
    PRIMARY KEY (doc_id, idx)
) WITHOUT ROWID;
"""),
    # When each extraction of a chunk that left the index left it, for ``index_rows.prune`` to
    # keep it store.keep_unused_days from then (or from when it was made, if later). The date was
    # written into each extraction row, whose update changed a page of its own: removing a 25 MB
    # file (4,574 chunks) wrote 19.8 MB of WAL, 18 MB of it for those dates. Rows of an older
    # index keep their meaning: an extraction dated so keeps its created_at.
    ("extractions_left", """
CREATE TABLE IF NOT EXISTS extractions_left (
    chunk_id TEXT NOT NULL,
    extractor TEXT NOT NULL,
    left_at REAL NOT NULL,
    PRIMARY KEY (chunk_id, extractor)
) WITHOUT ROWID;
"""),
    # The calls by run and request: `status` counts the unusable answers a later try of the same
    # run answered (``index_rows._ASKED_AGAIN``), each a look among every call of its run by
    # llm_calls_run alone: 2.0 s of a `status` of 300,000 calls in 10 runs, 0.06 s with it.
    # It stands for that index, whose searches by run it serves: 11.8 MB a 100,000 calls where
    # that one took 3.4 (the calls themselves take 17).
    ("llm_calls_run_key", """
CREATE INDEX IF NOT EXISTS llm_calls_run_key ON llm_calls(run_id, cache_key);
DROP INDEX IF EXISTS llm_calls_run;
"""),
    # The claims by their object: a local ask takes those naming a selected entity as their
    # object too (``local_search.load_local_data``), each ask a scan of every claim without it.
    ("claims_object", "CREATE INDEX IF NOT EXISTS claims_object ON claims(object_id)"),
    # The calls' usage as `status` sums it (``index_rows.usage_rows``), read from an index in its
    # order, not from every row of the table sorted by stage and model: 250 ms of a `status` of
    # 300,000 calls, 50 with it (some 4 MB a 100,000 calls, the calls themselves 27). And the
    # failed calls apart, among which `status` counts the unusable answers and those asked again
    # (``index_rows._UNUSABLE_CALLS``): a look at every call (40 ms), 4 ms of those that failed.
    ("llm_calls_usage", """
CREATE INDEX IF NOT EXISTS llm_calls_usage
    ON llm_calls(stage, model, cached, cancelled, prompt_tokens, completion_tokens, error);
CREATE INDEX IF NOT EXISTS llm_calls_failed ON llm_calls(cached, cancelled, error) WHERE error IS NOT NULL;
"""),
    # The keys of the failures `status` counts "recorded over all runs" (``FAILURE_KEY``) of the runs
    # that have ended, kept as they are written (by triggers: ``_FAILURE_KEY_TRIGGERS``): the count
    # read every failure's row, the keys sorted for DISTINCT (0.13 to 0.26 s of a `status` at
    # 200,000 failures); now it counts this table and looks at the failures of the runs under way.
    ("failure_keys", _failure_keys),
    # The new or changed files a run that publishes is taking, written as it starts on them
    # (``index_rows.note_taking``: how many, the first of them by name): a run killed with -9
    # (or the machine gone down) records no end, and `status` could not say which files it left
    # unindexed ("the new or changed files the killed update was taking, if any").
    ("runs_taking", _runs_taking),
    # The triggers of ``failure_keys`` made again: the one that marks it stale missed an ended
    # run's status changed to another end ('failed' to 'ok', by hand: the kept count went on
    # without its failures), and a run's end parsed its stats once per failure (``_run_unindexed``).
    ("failure_keys_status", _failure_key_triggers),
    # The count of ``failure_keys``, kept by the triggers that add keys: `status` counted the table
    # (some 16 ms at 215,000 keys, growing with it); it reads one row now.
    ("failure_keys_count", _failure_keys_count),
    # The encoding a chunk's ``tokens`` counts in (``index_rows.save_chunks``): a chunk is keyed by
    # its text alone, and its count stayed that of the first encoding it was cut with after
    # index.encoding changed (read back as the new one's by ``index_rows.backlog`` and
    # ``chunks_of``). A reader takes a count of its own encoding and counts the others (a basic
    # ask no longer builds the tokenizer, 0.23 s, to sum the counts of its chunks).
    ("chunks_encoding", _chunks_encoding),
    # The triggers that add failure keys made again, leaving out a key kept already in their
    # SELECT (``_new_keys``): an outer INSERT OR REPLACE into failures or runs overrode their OR
    # IGNORE, and each key there already was counted again; the keys counted once more (none of
    # streamrag's statements does so: a count off was of one run by hand, or none).
    ("failure_keys_guarded", _failure_keys_count),
    # The chunks stored before chunks.encoding (NULL there) that a document uses counted in the
    # encoding the index records, once (``_chunks_counted``): a basic ask of such an index built
    # the tokenizer to count its chunks until they were cut again (synth_small: 0.86 s of CPU and
    # 108 MB an ask, 0.50 s and 33 MB now), and ``backlog`` and ``chunks_of`` took their counts
    # for the run's encoding's, whichever cut them first. An offline index of 3,000 documents
    # (3,818 chunks, 14 MB of text): 0.8 s of CPU once.
    ("chunks_encoding_counted", _chunks_counted),
    # The failures of files over index.max_file_mb recorded as "unusable", which were told apart
    # by their line's words: a rewording would have remembered them as unusable files (not read
    # again after the setting was raised) and `status` would have said them wrongly. They have a
    # kind of their own now, "too_big" (``loader.TooBig``); those recorded before are made so.
    ("failures_too_big", _failures_too_big),
    # Whether an indexing run worked with a model or offline ("model", "offline"; NULL: an ask's
    # row, or one recorded before): `index --estimate` took an offline index in which a model run
    # killed part-way had stored a few extractions for one a model had published, and estimated
    # the next model run as an update of the offline partition (30 articles: 32 reports for the
    # run's 42, where a first index's estimate says 38). (``index_rows.model_run_completed``)
    ("runs_kind", _runs_kind),
    # Whether a failed call was a check of the endpoint that refused nothing (``CallLog.record``'s
    # apart: a check of a model by name that got no answer, a page, a 5xx): index and watch count
    # it in no call, and `status` counted it among its stage's errors, the down server's failed
    # check beside the refusal that stops a run. The row says which now (``index_rows._usage_by_model``).
    ("llm_calls_apart", _calls_apart),
]

SCHEMA_VERSION = len(MIGRATIONS)

# The steps a reader that cannot write the index (read-only media, another user's folder) may
# leave unapplied, by name, each with its proof, on the index as it lies, that it would change no
# row there: the step's own test before it writes anything (``_chunks_counted`` returns when
# ``_UNCOUNTED`` finds no chunk). An index that lacks any other step is read only once upgraded
# (a step that adds a table, an index or a column, or writes rows, changes what a read finds).
# The proof holds after the reader looked: a writer of the schema before (its ``save_chunks``
# records the run's encoding, and replaces a NULL one) or of this one (which upgrades first)
# gives a document only chunks it counted, or a document's chunks already.
_NO_OP_WHEN: dict[str, Callable[[sqlite3.Connection], bool]] = {
    "chunks_encoding_counted": lambda conn: conn.execute(f"SELECT 1 {_UNCOUNTED} LIMIT 1").fetchone() is None,
    # Changes rows, but none as a reader reads them: the readers of "too_big" apart
    # (``index_rows.too_big_failures``, `status`; ``index_rows.left_by_killed``, `status` of a
    # killed run) read an unkinded row by its line as well, and every other says "too_big" as
    # "unusable" (``errors.said_kind``). An index an older streamrag
    # (index.max_file_mb came a session before this step) left on read-only media with a file
    # over the setting was refused by `ask` and `status` until copied where it could be upgraded.
    "failures_too_big": lambda conn: True,
    # (a column, no row: ``index_rows`` reads the runs of a table without it as of no kind recorded)
    "runs_kind": lambda conn: True,
    # (a reader counts a row without the column as not apart: ``index_rows.calls_apart``; one
    # recorded after the reader looked, by a writer of the schema before, is counted among the
    # errors, as that streamrag's `status` counted it)
    "llm_calls_apart": lambda conn: conn.execute(f"SELECT 1 {_CHECKS_APART} LIMIT 1").fetchone() is None,
}


# The files SQLite and the writer's lock (``lock_path``) keep beside an index's database.
_SIDE_FILES = (".lock", "-wal", "-shm", "-journal")


def index_files(db_path: Path) -> set[Path]:
    """The files an index at ``db_path`` is made of (its database, SQLite's side files and the
    writer's lock), resolved: never documents, wherever the index lies."""
    db = Path(db_path).resolve()
    return {db, *(db.with_name(db.name + s) for s in _SIDE_FILES)}


def root_and_paths(db_path: Path) -> tuple[str | None, list[str]]:
    """The folder the index at ``db_path`` was built of (``None`` before its first publish) and
    its files' paths, read as the file is, through a plain read-only connection: no ``Store``,
    which upgrades an older schema before the first read, even a reader's (a look at an index
    to decide whether to write it wrote it). Read alike by every schema version; raises
    ``sqlite3.Error`` for a file that is no index. The -shm a reader of a WAL index makes (and
    cannot remove) is removed after it by ``fold_wal``, with the log (folded in), only if no other
    connection has the index open by then: a writer that opened it meanwhile shares that -shm,
    and unlinking it under the writer let the next reader make another, blind to the writer's
    commits. A -shm there before the look is another's, and left as it is."""
    with _looked_at(Path(db_path)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
        return (row[0] if row else None), [p for (p,) in conn.execute("SELECT path FROM files")]


def recorded_extractor(db_path: Path) -> str | None:
    """The extractor the index at ``db_path`` was last published with (``nlp-...`` offline,
    ``llm-...`` by a model; ``None`` before its first publish), looked at as ``root_and_paths``
    looks: raises ``sqlite3.Error`` for a file that is no index."""
    return _recorded(db_path, "extractor")


def recorded_root(db_path: Path) -> str | None:
    """The folder the index at ``db_path`` was built of, as ``root_and_paths`` reads it, without
    reading every file's path beside it (of 300,000 files, for a look at the root alone)."""
    return _recorded(db_path, "root")


def _recorded(db_path: Path, key: str) -> str | None:
    """The meta value ``key`` of the index at ``db_path`` (``None`` if unset), looked at as
    ``root_and_paths`` looks: raises ``sqlite3.Error`` for a file that is no index."""
    with _looked_at(Path(db_path)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None


def run_commands(db_path: Path) -> set[str]:
    """The commands the runs recorded in the index at ``db_path`` were started by ("index",
    "watch", "demo" ...), looked at as ``root_and_paths`` looks: raises ``sqlite3.Error`` for a
    file that is no index."""
    with _looked_at(Path(db_path)) as conn:
        return {command for (command,) in conn.execute("SELECT DISTINCT command FROM runs")}


@contextlib.contextmanager
def _looked_at(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A plain read-only connection to ``db_path``, its -shm folded away after it as
    ``root_and_paths`` says."""
    had_shm = Path(f"{db_path}-shm").exists()
    conn = sqlite3.connect(_reader_uri(db_path), uri=True, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()
        if not had_shm:
            fold_wal(db_path)


def without_index_files(files: list[Path], db_path: Path, also: Iterable[Path] = ()) -> list[Path]:
    """``files`` less the index's own (``index_files``) and ``also`` (``Settings.own_files``):
    `--db notes/index.txt`, or a custom prompt kept beside the notes, is no document."""
    from streamrag.loader import one_of   # (the loader is a reader's: not imported by every store)

    own = one_of([*index_files(db_path), *also])
    return [f for f in files if not own(f)]


def lock_path(db_path: Path | str) -> Path:
    """The writer lock's file of the index at ``db_path`` (``WriterLock``)."""
    return Path(f"{Path(db_path).resolve()}.lock")


def default_db_path(root: Path) -> Path:
    """Where the index of folder ``root`` lives unless configured otherwise."""
    root = root if root.is_dir() else root.parent
    return root / ".streamrag" / "index.db"


class Store:
    """One SQLite connection with the project's schema. Not shared across threads."""

    def __init__(self, path: Path | str, *, readonly: bool = False, upgrade: bool = True) -> None:
        """``upgrade=False`` (a reader's, for ``check_readable`` and ``reader_in_place`` alone): an
        older streamrag's index is left as it lies, not upgraded, and not proved to read as if it were."""
        self.path = Path(path)
        self.readonly = readonly
        # (an index in memory, ``estimate.first_graph``'s: no file, so none said opened, no WAL to fold)
        self._memory = str(path) == ":memory:"
        if readonly and not self.path.exists():
            raise IndexMissingError(
                f"no index at {self.path}; build one with `streamrag index DIR` "
                "(or pass --db to point at an existing one)")
        side = [Path(f"{self.path}{s}") for s in ("-wal", "-shm")]
        if not readonly and (refusal := unwritable_here(self.path)) is not None:
            raise refusal
        if not readonly and (refusal := _side_folder(self.path)) is not None:
            raise refusal
        locked = [f for f in (self.path, *side)
                  if not readonly and f.is_file() and (not os.access(f, os.W_OK) or _immutable(f))]
        if locked:
            # (SQLite opens it read-only without a word, and the first write failed mid-run; a
            # reader makes -shm with the file's mode, so it stays read-only after a chmod of it)
            files = " ".join(f"'{f}'" for f in (self.path, *side) if f.exists())
            if _immutable(locked[0]):   # (no chmod lifts it, root's neither)
                raise StoreError(f"{locked[0]}: the index file is marked immutable or append-only, so "
                                 f"no one may write it; lift that (chattr -i -a {shell_word(locked[0])}, as root)")
            raise StoreError(f"{locked[0]}: the index file is read-only to you; make it writable "
                             f"(chmod u+w {files}), or run as its owner")
        try:
            if not readonly:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            uri = f"{_uri_path(self.path)}?mode=ro" if readonly else str(self.path)
            stamp = _file_stamp(self.path) if readonly else None   # (before it is first read)
            conn = sqlite3.connect(uri, uri=readonly, isolation_level=None,
                                   check_same_thread=False, timeout=30)
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_S * 1000}")
            if not readonly:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                # Freed pages are not overwritten with zeros (deleted rows are, on the pages a
                # write changes anyway). Builds that zero them (Debian's SQLite) wrote a page
                # for every page a delete freed: removing a 25 MB file's rows wrote 153 MB to
                # the WAL, 86 MB with FAST; its full-text table made again 49 MB, not 0.5.
                conn.execute("PRAGMA secure_delete = FAST")
            conn.execute("PRAGMA foreign_keys = OFF")
            if readonly:
                conn = _readable(conn, self.path)
            conn.create_function("fts_text", 1, fts_text, deterministic=True)   # for SQL filling FTS
        except (sqlite3.Error, OSError) as e:
            raise _open_error(self.path, e) from None
        self.conn = conn
        # Read as unchanging (``_readable``), the file as it was then: a publish folded into it
        # meanwhile is under the reader's feet, with no lock to hold it off (``snapshot``).
        self._unchanging_stamp = stamp if str(self.path) in _unchanging else None
        self._closed = False
        if not self._memory:
            _opened(self.path)
        try:
            if readonly:
                self._check_version(upgrade)
            else:
                self.migrate()
        except BaseException:
            self.close()
            raise

    # -- schema ------------------------------------------------------------------------------
    def _applied(self) -> int:
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            return 0
        except sqlite3.DatabaseError as e:  # "file is not a database", a damaged file
            self.conn.close()
            raise _open_error(self.path, e) from None
        return int(row[0]) if row else 0

    def _check_version(self, upgrade: bool = True) -> None:
        applied = self._applied()
        if applied > SCHEMA_VERSION:
            raise StoreError(f"{self.path} was written by a newer streamrag (schema {applied}, "
                             f"this one knows {SCHEMA_VERSION}); upgrade streamrag")
        if applied == 0:
            # (another program's database was said to hold "no index yet", and `index` of it
            # then refused it)
            raise self._foreign_tables_error() or IndexMissingError(
                f"{self.path} holds no index yet; run `streamrag index DIR`")
        if applied < SCHEMA_VERSION and upgrade:
            if _read_only_here(self.path) is not None and self._upgrade_changes_nothing():
                # (it was refused until copied, where the copy's upgrade changed no row of it)
                log.debug("%s: read at schema %s, as the steps after would leave it", self.path, applied)
                return
            # Written by an older streamrag: bring the schema forward (a short write), then read;
            # not under a writer at work (an older `watch` left running across an upgrade failed
            # every sync after a new `status` upgraded its index). A writer lock this process holds
            # is no other's: it upgrades under it, noted there (`watch` reads before it writes).
            held = _others_lock(self.path)
            if held is not None:
                holder = _holder_of(held)
                if (to := _upgrading_to(held)) is not None:
                    raise WriterBusyError(_being_upgraded(self.path, holder, to))
                # (a writer of this version upgrades the index before it writes, saying so in the
                # lock from the moment it takes it: ``WriterLock.take``, ``migrate``; one that does
                # not say so is older)
                raise WriterBusyError(
                    f"{self.path} is being written by another streamrag ({holder}), and this one would "
                    "have to upgrade it first: if that one is an older version (a `watch` left running "
                    "across an upgrade), stop it and start it again; then run this again")
            try:
                Store(self.path).close()
            except StoreBusyError:
                raise
            except (StoreError, sqlite3.Error) as e:  # a write refused mid-migration: sqlite3's
                # (each step is one transaction: a refused one leaves the file as it was)
                raise _not_upgraded(self.path, applied, e) from None

    def _upgrade_changes_nothing(self) -> bool:
        """Whether the upgrade of this index (an older schema's) would change none of its rows,
        so that it reads as the upgraded index would: each step it lacks proves it of this index
        (``_NO_OP_WHEN``), and its failure keys are not marked stale (made again as the last step
        ends: ``migrate``). Asked in one read transaction, the version read again in it."""
        with self.snapshot():
            applied = self._applied()
            pending = [name for name, _sql in MIGRATIONS[applied:]]
            if applied > SCHEMA_VERSION or any(name not in _NO_OP_WHEN for name in pending):
                return False
            if pending and self.get_meta("failure_keys_stale"):
                return False
            return all(_NO_OP_WHEN[name](self.conn) for name in pending)

    def _foreign_tables_error(self) -> StoreError | None:
        """The refusal of a database with no schema version that holds tables: another
        program's, not an index (yet to be made), else ``None``."""
        if not self.scalar(_OTHER_TABLES):
            return None
        return _other_programs_database(self.path)

    def migrate(self) -> None:
        applied = self._applied()
        if applied > SCHEMA_VERSION:
            self._check_version()
        said = applied == 0   # a new index is made, not upgraded
        if applied == 0 and (foreign := self._foreign_tables_error()) is not None:
            # (another program's database: some 60 tables were written in among its own)
            raise foreign
        # A writer lock this process holds says "upgrading" meanwhile (``upgrading_note``), for a
        # reader that meets it to say so, not "if that one is an older version, stop it".
        lock = _writer_locks.get(lock_path(self.path)) if not self._memory else None
        if lock is not None and not 0 < applied < SCHEMA_VERSION:
            lock.upgraded()
            lock = None
        noted = lock.noted if lock is not None else None
        if lock is not None:
            lock.note(upgrading_note(SCHEMA_VERSION))
        try:
            self._apply_steps(applied, said)
        finally:
            if lock is not None:
                lock.note(noted)

    def _apply_steps(self, applied: int, said: bool) -> None:
        """The steps after ``applied``, each in a transaction of its own with its version."""
        for number, (_name, sql) in enumerate(MIGRATIONS[applied:], start=applied + 1):
            with self.transaction():
                if self._applied() >= number:   # another process upgraded it while this one waited
                    continue
                if not said and self.scalar("SELECT 1 FROM chunks LIMIT 1"):
                    log.warning("upgrading the index at %s for this streamrag (once; a large one "
                                "takes a minute)", self.path)
                said = True
                if callable(sql):
                    sql(self.conn)
                else:
                    for statement in _split_sql(sql):
                        self.conn.execute(statement)
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(number),))
                # The keys a step marked stale (``_failure_key_triggers``), made again once for
                # them all, in the last step's transaction: in one of their own after it, a crash
                # between the two left the index at this schema marked stale, and every `status`
                # read all failures until a run ended (a crash now leaves the last step undone:
                # the next open applies it again).
                if number == SCHEMA_VERSION and self.get_meta("failure_keys_stale"):
                    count_failure_keys(self.conn)

    # -- transactions ------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on error).

        ``BEGIN IMMEDIATE`` waits inside SQLite (blocking this thread) up to ``_BUSY_S`` for
        another connection's write lock, then raises StoreBusyError. The writer task waits on
        the event loop instead (``try_begin``)."""
        if self.conn.in_transaction:
            yield self.conn
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            if not _is_busy(e):
                raise
            raise self.busy_error(e) from None
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:   # (SQLite may have rolled back itself: a full disk)
                self.conn.execute("ROLLBACK")
            raise

    def try_begin(self) -> bool:
        """``BEGIN IMMEDIATE`` without waiting: False while another connection holds the write
        lock. The caller then waits as it likes (``writer.Writer`` sleeps on the event loop)."""
        with self._not_waiting():
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                return False

    @contextlib.contextmanager
    def _not_waiting(self) -> Iterator[None]:
        """The block's statements not waiting for another connection's lock; then the wait as it
        was, not ``_BUSY_S``'s: a caller's own (a test's, or one set after ``_BUSY_S`` changed)
        was lost to the module's each time a write was begun or refused."""
        was = self.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        self.conn.execute("PRAGMA busy_timeout = 0")
        try:
            yield
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(was)}")

    @staticmethod
    def busy_wait_s() -> float:
        """How long a write waits for another connection's write lock before giving up."""
        return _BUSY_S

    def busy_error(self, e: Exception | None = None, waited: float | None = None) -> StoreBusyError:
        """The refusal of a write that found another connection's write lock held throughout
        (``waited`` s; ``_BUSY_S`` if not said). While the index's schema is older than this
        streamrag's, the holder is likely one upgrading it (``migrate``: a step over every chunk
        of a large index outlasts the wait), which is said: "let it finish, else stop the program
        holding it" read as if something had gone wrong."""
        held = f"{self.path} stayed locked by another process for {_BUSY_S if waited is None else waited:g} s"
        why = f" ({e})" if e is not None else ""
        if self._upgrade_due():
            # (said in the writer lock: not this process's own, noted by its ``migrate`` that met
            # the lock, which named itself as the other streamrag upgrading it)
            lines = _others_lock(self.path)
            if lines is not None and _upgrading_to(lines) is not None:
                return StoreBusyError(f"{held}{why}; another streamrag ({_holder_of(lines)}) is upgrading it "
                                      "(an upgrade of a large index takes a while): run the command again once "
                                      "it is done")
            return StoreBusyError(f"{held}{why}; another streamrag may be upgrading it (an upgrade of a large "
                                  "index takes a while): run the command again once it is done")
        return StoreBusyError(f"{held}{why}; if another streamrag is writing it, let it finish, else stop the "
                              "program holding it")

    def _upgrade_due(self) -> bool:
        """Whether the index's committed schema is an older streamrag's (not none: an index
        being made), read without waiting for a lock (a WAL index's read takes none; a file
        another program keeps in rollback mode may be locked to readers too: not known then)."""
        try:
            with self._not_waiting():
                row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            return row is not None and 0 < int(row[0]) < SCHEMA_VERSION
        except (sqlite3.Error, ValueError):
            return False

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Store]:
        """A read transaction: every query inside sees the same published version."""
        if self.conn.in_transaction:
            yield self
            return
        self.conn.execute("BEGIN")
        try:
            yield self
        finally:
            # Closed already: a stop (Ctrl-C, SIGTERM) taken as the with statement began or ended,
            # before this generator was resumed, left it at its yield until it was collected, after
            # the command's close; closing ended the read. Its COMMIT then printed "Exception ignored
            # in: <generator object Store.snapshot> ... closed database" below `export -`'s line.
            if not self._closed:
                self.conn.execute("COMMIT")
        if self._unchanging_stamp is not None and _file_stamp(self.path) != self._unchanging_stamp:
            raise StoreError(f"{self.path}: the index was updated while this command read it, and what it "
                             f"read may mix two versions ({unchanging_why(self.path)}, so the read could "
                             "not hold the update off); run the command again")

    def close(self) -> None:
        """Closes the connection. When it was this process's last one on the file, the WAL is
        folded into the main file and -wal/-shm removed, unless another connection (any process)
        still has the database open: then they stay, for that connection's last close."""
        if self._closed:
            return
        self._closed = True
        try:
            self.conn.close()
        finally:
            if not self._memory and _closed_last(self.path):
                fold_wal(self.path)

    # -- small helpers -----------------------------------------------------------------------
    def query(self, sql: str, params: Any = ()) -> list[dict]:
        """The rows of ``sql`` as dicts keyed by column name."""
        cursor = self.conn.execute(sql, params)
        names = [column[0] for column in cursor.description or ()]
        return [dict(zip(names, row)) for row in cursor]

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return row[0] if row else None

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        value = self.scalar("SELECT value FROM meta WHERE key = ?", (key,))
        return default if value is None else value

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    @property
    def version(self) -> int:
        """The published index version (0 = nothing published yet)."""
        return int(self.get_meta("version", "0") or 0)

    # -- cache and accounting ----------------------------------------------------------------
    def cache_get(self, key: str) -> str | bytes | None:
        """A cached ``response`` as stored: text, or a compressed blob (``answer_cache.unpack``)."""
        return self.scalar("SELECT response FROM llm_cache WHERE key = ?", (key,))

    def cache_put(self, key: str, model: str, response: str | bytes, *, replace: bool = False) -> None:
        """Caches ``response``; over a row of ``key`` only when ``replace`` (one found unusable)."""
        self.conn.execute(
            f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO llm_cache(key, model, response, created_at) "
            "VALUES (?,?,?,?)", (key, model, response, time.time()))

    def record_call(self, row: dict) -> None:
        """One ``llm_calls`` row (``created_at``: now, unless the row says when; ``apart``: a failed
        check of the endpoint that refused nothing, ``CallLog.record``)."""
        cols = ("run_id", "stage", "model", "prompt", "prompt_version", "cache_key",
                "prompt_tokens", "completion_tokens", "latency_ms", "cached", "error")
        self.conn.execute(
            f"INSERT INTO llm_calls({', '.join(cols)}, cancelled, apart, created_at) "
            f"VALUES ({', '.join('?' * len(cols))}, ?, ?, ?)",
            (*(row.get(c) for c in cols), int(row.get("cancelled", 0)), int(row.get("apart", 0)),
             row.get("created_at") or time.time()))

    def record_failure(self, run_id: str | None, stage: str, item: str, message: str,
                       stamp: str | None = None, kind: str | None = None) -> None:
        """``stamp``: of the file (or folder) that could not be read, as it was (``failures_stamp``);
        ``kind``: what a load failure is of (``failures_kind``)."""
        self.conn.execute(
            "INSERT INTO failures(run_id, stage, item, message, created_at, stamp, kind) VALUES (?,?,?,?,?,?,?)",
            (run_id, stage, item, message, time.time(), stamp, kind))

    def start_run(self, run_id: str, command: str, update_of: str | None = None, kind: str | None = None) -> None:
        """``update_of``: the first run of the update this one goes on with (``runs_update_of``);
        ``kind``: an indexing run's, "model" or "offline" (``runs_kind``; None: an ask's).
        The row names this process (``runs_process``: ``process_gone`` tells once it is gone)."""
        pid = os.getpid()
        self.conn.execute("INSERT INTO runs(id, command, started_at, status, update_of, pid, process, kind) "
                          "VALUES (?,?,?,?,?,?,?,?)",
                          (run_id, command, time.time(), "running", update_of, pid, process_stamp(pid), kind))

    def finish_run(self, run_id: str, status: str, stats: str | None = None) -> None:
        """Closes the run's row (its failures' keys go into ``failure_keys`` by trigger; a table
        left stale is made again here, once)."""
        self.conn.execute("UPDATE runs SET finished_at = ?, status = ?, stats = ? WHERE id = ?",
                          (time.time(), status, stats, run_id))
        if self.get_meta("failure_keys_stale"):
            count_failure_keys(self.conn)


# Stores open in this process, by file: the WAL is folded in only after the last one closes.
_open_counts: dict[str, int] = {}
_open_lock = threading.Lock()


def _key(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path.absolute())


def _opened(path: Path) -> None:
    global _last_opened
    with _open_lock:
        key = _key(path)
        _open_counts[key] = _open_counts.get(key, 0) + 1
        _last_opened = path


_last_opened: Path | None = None


def last_opened() -> Path | None:
    """The index database this process opened last (what an SQLite error is most likely of)."""
    return _last_opened


def _closed_last(path: Path) -> bool:
    with _open_lock:
        key = _key(path)
        left = _open_counts.get(key, 1) - 1
        if left > 0:
            _open_counts[key] = left
            return False
        _open_counts.pop(key, None)
        return True


def _is_busy(e: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up on (or refused to wait for) another connection's lock."""
    return "locked" in str(e) or "busy" in str(e)


def fold_wal(path: Path | str) -> None:
    """Folds the WAL of the database at ``path`` into the main file and removes -wal and -shm,
    if no connection (of any process) has the database open; otherwise does nothing.

    A read-only connection creates -wal/-shm but cannot fold or remove them when it is the
    last to close, and a writer that closes while a reader is still open leaves them for the
    reader. So this opens a short-lived read-write connection (never creating the file), reads
    the schema so that it joins the WAL, and closes it: SQLite's close then takes the file's
    exclusive lock without waiting, which succeeds only when no other connection has the
    database open, checkpoints every committed frame and deletes the WAL and shared memory. If
    the lock is not free (``watch``, a running ``index``, another reader), the close just
    closes: nothing is written and the WAL stays for whoever closes last (reading the schema
    may wait up to 5 s for a writer recovering the WAL; the close itself never waits). Only
    committed pages are copied into the main file; the index content is unchanged.
    """
    path = Path(path)
    wal = Path(f"{path}-wal")
    shm = Path(f"{path}-shm")
    if not (wal.exists() or shm.exists()) or not path.exists():
        return
    try:
        conn = sqlite3.connect(f"{_uri_path(path)}?mode=rw", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=5)
    except sqlite3.Error:
        return  # e.g. the file is not writable here: leave the WAL to a writer
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        pass
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()


EMPTY_TRIES_S = (0.1, 1.5)
"""How long the tries of ``empty_wal`` hold the write lock, waiting for readers: a short one
first (the queries of older versions about to end), then 1.5 s each, below the 2 s an ``ask``
waits for the lock to record its answer (``query._ASK_WAIT_S``). A try empties the log under
queries up to half its length one after another (see ``empty_wal``); tries of 0.1 s, all
alike, never did under queries of 0.5 s and a write every 0.15 s: the write landed between two
tries, and every try found a query reading it."""
EMPTY_GAP_S = 0.2
"""The pause between two tries of ``empty_wal``, the write lock free: longer than the longest
sleep of a writer waiting for it (``writer.Writer``'s 0.1 s, SQLite's busy handler's 0.1 s),
so that every waiting writer gets it in one pause."""
EMPTY_PATIENT_S = 5.0
"""How long ``empty_wal`` tries with pauses for writers before the rest of its wait is one try."""
EMPTY_SLICE_S = 0.25
"""A try waits for readers in slices of this, one after another without a pause (a writer
hardly gets in between), so that a stop ends it within a slice: SQLite's wait cannot be interrupted."""


def empty_wal(path: Path | str, wait_s: float, stop: threading.Event | None = None) -> bool:
    """Copies every committed page of the WAL of the database at ``path`` into the main file
    and empties the WAL (SQLite's ``wal_checkpoint(TRUNCATE)``); True if it did.

    SQLite copies a page back only once no reader of an older version needs it, and starts the
    WAL over only once no reader reads from it. A try holds the write lock, so no version comes
    while it waits: it waits for the readers of older versions to end, copies the rest, and
    then for the readers begun meanwhile, which still read from the log; readers begun after
    the copy read the main file alone. Under queries of L seconds one after another a try thus
    needs up to 2 L from the last write before it. Tries hold the lock for ``EMPTY_TRIES_S``
    (growing), the lock free ``EMPTY_GAP_S`` between them, for ``EMPTY_PATIENT_S``: a writer
    (an ``ask`` recording its calls) waits one try at most, 1.5 s. (One wait of up to 30 s held
    the lock throughout: an ``ask`` made meanwhile gave up recording after its 2 s, 7 of 33
    under a stress test.) Under longer queries while a writer comes at every pause, no try
    short enough for a writer can empty the log (6 queries of 2 s, a write every second: the
    write in each pause is read by queries that outlast the next try); then the rest of
    ``wait_s`` is one try, so that the log stays bounded, a writer meanwhile maybe giving up.
    Readers are never held up.

    The copying goes first, without the write lock (``PASSIVE``), so that a try does not hold
    it while a large log is copied (300 MB: 2.4 s). ``stop`` ends it all within a slice of a
    try (``EMPTY_SLICE_S``), the copying at once. False when the wait ran out, ``stop`` was
    set, or the database cannot be opened for writing."""
    started = time.monotonic()
    deadline, patient = started + wait_s, started + EMPTY_PATIENT_S
    stop = stop or threading.Event()
    try:
        conn = sqlite3.connect(f"{_uri_path(Path(path))}?mode=rw", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=EMPTY_TRIES_S[0])
    except sqlite3.Error:
        return False
    ended = threading.Event()

    def interrupt_on_stop() -> None:   # (SQLite is interrupted from another thread)
        while not ended.is_set():
            if stop.wait(0.05):   # (a copy ends at once, a wait for readers at its end; again,
                with contextlib.suppress(sqlite3.ProgrammingError):   # as one between two
                    conn.interrupt()   # statements is lost; closed meanwhile: nothing to stop)
                ended.wait(0.05)

    threading.Thread(target=interrupt_on_stop, name="streamrag-empty-wal-stop", daemon=True).start()
    try:
        if stop.is_set():
            return False
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        tries = 0
        while True:
            if time.monotonic() < patient:
                hold = EMPTY_TRIES_S[min(tries, len(EMPTY_TRIES_S) - 1)]
            else:
                hold = wait_s   # (the rest of the wait: one try)
            tries += 1
            if _try_emptying(conn, min(time.monotonic() + hold, deadline), stop):
                return True
            if stop.is_set() or time.monotonic() >= deadline:
                return False
            if time.monotonic() < patient and stop.wait(EMPTY_GAP_S):
                return False
    except sqlite3.Error:   # (interrupted by ``stop``, or the database failed)
        return False
    finally:
        ended.set()
        with contextlib.suppress(sqlite3.Error):
            conn.close()


def _try_emptying(conn: sqlite3.Connection, until: float, stop: threading.Event) -> bool:
    """One try of ``empty_wal``, in slices until ``until`` (or ``stop``); True if it emptied."""
    while True:
        wait = min(EMPTY_SLICE_S, max(until - time.monotonic(), 0.0))
        conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        busy, _log, _copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy == 0:
            return True
        if stop.is_set() or time.monotonic() >= until:
            return False


WAL_BOUND = 64 * 2**20
"""A write-ahead log past this many bytes after a publish is emptied (``bound_wal``): queries
that overlap without a gap kept it growing by every version published, 37 MB in 3 minutes of a
sync every few seconds under 12 looping `ask`s (``watch``), and without bound under a cron
``index`` next to long-lived readers (a web app or notebook holding its connection)."""


def bound_wal(path: Path | str, tried: int = 0,
              stop: threading.Event | None = None) -> tuple[bool, int, float] | None:
    """Empties the WAL of the database at ``path`` once it is past ``WAL_BOUND`` and twice
    ``tried`` (its size when emptying it last failed); ``(emptied, size, took_s)``, or None
    when it was not tried. The index's writer calls it after a publish, holding the writer lock.

    ``empty_wal`` waits up to ``Store.busy_wait_s()`` for readers of older versions (or until
    ``stop`` is set). Under queries of 30 s one after another the wait took 14 to 23 s; half
    of it was too short. When readers outlast the wait (one holding a snapshot open: a notebook,
    a stopped process) the caller passes the size as ``tried`` next time, so that it is tried
    again only once the log has doubled: not at every publish, each then waiting as long.
    SQLite cannot interrupt a try: callers run it in a thread of its own."""
    size = wal_past_bound(path, tried)
    if size is None:
        return None
    started = time.monotonic()
    emptied = empty_wal(path, Store.busy_wait_s(), stop)
    return emptied, size, time.monotonic() - started


def wal_tried(path: Path | str) -> int:
    """The size of the WAL of the database at ``path`` when emptying it last failed, as
    ``remember_wal_tried`` noted it in the index, for ``bound_wal``'s ``tried``; 0 when it did
    not fail, or the log was started over since (emptied, or folded in by the last connection:
    its readers gone). A command run again and again (`index` by cron) otherwise waited the
    whole wait at every run for the same reader, a snapshot left open."""
    stamp = _wal_stamp(path)
    if stamp is None:
        return 0
    try:
        conn = sqlite3.connect(f"{_uri_path(Path(path))}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=_BUSY_S)
    except sqlite3.Error:
        return 0
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'wal_tried'").fetchone()
    except sqlite3.Error:
        return 0
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
    size, _, of = (row[0] if row else "").partition(" ")
    return int(size) if of == stamp and size.isdigit() else 0


def remember_wal_tried(path: Path | str, tried: int) -> None:
    """Notes in the index at ``path`` that emptying its WAL failed at ``tried`` bytes, with the
    log's stamp (``_wal_stamp``), or that it did not fail (0), for ``wal_tried``; nothing is
    written when that is noted already. Bookkeeping only: when the index cannot be written
    now, it is left as it is."""
    value = f"{tried} {_wal_stamp(path)}" if tried else None
    try:
        conn = sqlite3.connect(f"{_uri_path(Path(path))}?mode=rw", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=2.0)
    except sqlite3.Error:
        return
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'wal_tried'").fetchone()
        if (row[0] if row else None) == value:
            return
        if value is not None:
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('wal_tried', ?)", (value,))
        else:
            conn.execute("DELETE FROM meta WHERE key = 'wal_tried'")
    except sqlite3.Error:
        return
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()


def _wal_stamp(path: Path | str) -> str | None:
    """What tells this WAL of the database at ``path`` from a later one: its header's checkpoint
    sequence and salts, which SQLite changes whenever it starts the log over; None without one."""
    try:
        with open(f"{path}-wal", "rb") as f:
            header = f.read(24)
    except OSError:
        return None
    return header[12:24].hex() if len(header) == 24 else None


def wal_past_bound(path: Path | str, tried: int = 0) -> int | None:
    """The size of the WAL of the database at ``path`` when ``bound_wal`` would empty it, else
    None: a look only, for a caller that must not wait for a thread at every publish."""
    try:
        size = Path(f"{path}-wal").stat().st_size
    except OSError:
        return None
    return size if size > max(WAL_BOUND, tried * 2) else None


def wal_kept_line(path: Path | str, size: int, took: float) -> str:
    """The warning when readers kept the WAL of ``path`` (``size`` bytes) from being emptied
    (by ``index`` or ``watch``: both try again once it has doubled, ``bound_wal``'s ``tried``)."""
    return (f"{path}-wal, the index's write-ahead log, is {size / 1e6:.0f} MB: readers kept it "
            f"from being emptied for {took:.0f} s (queries that overlap without a gap, or a "
            f"program holding the index open in one snapshot); tried again once it is twice as "
            "large")


def _readable(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """``conn``, a read-only connection, or one that can read when it cannot.

    A reader of a WAL database makes ``index.db-shm`` beside it, which it cannot in a folder it
    may not write (a read-only mount, another user's index). With no write-ahead log to take
    in, the file alone is the whole index, and SQLite reads it as unchanging (``immutable``);
    with one, a writer is at work, and the reader is refused in one line. A file read-only to
    the user in a folder they may write is read so too (``_leaves_side_files``): the -wal and
    -shm a reader would make there, it could not remove."""
    if _leaves_side_files(path):
        conn.close()   # (before its first read: it has made nothing yet)
        return _unchanging_connection(path)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as e:
        name = getattr(e, "sqlite_errorname", "") or ""
        # (the -shm file could not grow: a full disk, where a whole index stayed unreadable; any
        # other I/O error is no reason to read it without locks, and may be damage)
        if name not in ("SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN", "SQLITE_IOERR_SHMSIZE"):
            raise
    conn.close()
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(f"{path}: its folder is read-only to you, and a write-ahead log lies beside it "
                         f"({wal.name}: a writer is at work, or stopped before folding it in), which a "
                         "reader there cannot take in; try again once the writer has finished, or run "
                         "any streamrag command on it with write access to the folder (on read-only "
                         f"media: copy it with its {wal.name} to a folder you may write, and use the copy)")
    return _unchanging_connection(path)


def _unchanging_connection(path: Path) -> sqlite3.Connection:
    """A connection reading the index at ``path`` as unchanging: no lock, nothing made beside it;
    ``Store.snapshot`` tells a publish folded in meanwhile by the file's stamp."""
    _unchanging.add(str(path))
    return sqlite3.connect(_reader_uri(path, unchanging=True), uri=True, isolation_level=None,
                           check_same_thread=False)


def _leaves_side_files(path: Path) -> bool:
    """Whether a reader of the index at ``path`` would make a -wal or -shm file beside it that it
    could not remove: the index is in WAL mode, the file is read-only to the user (in a folder
    they may write: SQLite makes the files with the file's mode, and only a connection that may
    write the file removes them at its close), one of the two is missing, and no log holds
    writes to take in. ``status`` and ``ask`` of a chmod 444 index left notes.db-wal and
    notes.db-shm (mode 444) behind. With both there (a writer at work, another user's), the
    reader reads through them and leaves them as they were."""
    side = [Path(f"{path}{s}") for s in ("-wal", "-shm")]
    if os.access(path, os.W_OK) or all(f.exists() for f in side) or not _in_wal_mode(path):
        return False
    with contextlib.suppress(OSError):
        if side[0].stat().st_size > 0:
            return False   # (writes only the log holds: read through it, with the -shm it needs)
    return True


def _in_wal_mode(path: Path) -> bool:
    """Whether the database at ``path`` is in WAL mode (its header's read version 2): a reader of
    one in rollback mode makes nothing beside it, and may have a journal to take in."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return head.startswith(_SQLITE_HEADER) and len(head) == 20 and head[18] == 2


def _reader_uri(path: Path, *, unchanging: bool | None = None) -> str:
    """The URI a reader opens the database at ``path`` by: read-only, and as unchanging
    (``immutable``) where it would otherwise leave side files behind (``_leaves_side_files``)
    or when ``unchanging`` says so."""
    if unchanging is None:
        unchanging = _leaves_side_files(path)
    return f"{_uri_path(path)}?mode=ro" + ("&immutable=1" if unchanging else "")


def unchanging_why(path: Path | None) -> str:
    """Why the index at ``path`` is read as unchanging, for a message: its file or its folder
    read-only to the user."""
    if path is not None and not os.access(path, os.W_OK):
        return "the file is read-only to you"
    return "its folder is read-only to you"


_unchanging: set[str] = set()   # indexes this process reads as unchanging (``_readable``)


def _file_stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when a file is written or replaced (None if it is gone)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_as_unchanging() -> bool:
    """Whether this process reads an index as unchanging: an error reading it then most likely
    means its owner's indexer wrote it meanwhile, not that it is damaged."""
    return bool(_unchanging)


def _uri_path(path: Path) -> str:
    """``file:`` URI of ``path`` (characters that mean something in a URI escaped)."""
    from urllib.parse import quote

    return "file:" + quote(os.fsencode(path.absolute()), safe="/")   # (bytes: a name not UTF-8 too)


_SQLITE_HEADER = b"SQLite format 3\x00"


_OTHER_TABLES = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"


def _other_programs_database(path: Path) -> StoreError:
    return StoreError(f"{path}: an SQLite database that is not a streamrag index (it holds "
                      "other tables); give --db (or store.path) a new file, or an index's")


def foreign_file_error(path: Path) -> StoreError | None:
    """The refusal of ``path`` when it is a file with something in it other than a streamrag
    index (most likely a document given as the index by mistake, or another program's SQLite
    database), else ``None``. Asked before the writer lock is taken, which left
    ``notes.md.lock`` beside the document (and ``o.db.lock`` beside the database, turned to WAL)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError:
        return None   # (said where the file is opened)
    if head == _SQLITE_HEADER:
        return _other_tables_error(path)
    if not head:
        return None
    # (Never "remove it".)
    return StoreError(f"{path}: not a streamrag index (not an SQLite database: some other file); "
                      "give --db (or store.path) the index's file, or a path where none is yet for "
                      "`streamrag index DIR` to build one there")


def _other_tables_error(db: Path) -> StoreError | None:
    """The refusal of the SQLite database ``db`` when it holds tables but no schema version
    (another program's), else ``None``; only reads, and leaves no -wal or -shm it made."""
    side = [Path(f"{db}-wal"), Path(f"{db}-shm")]
    had_side = any(f.exists() for f in side)
    try:
        conn = sqlite3.connect(_reader_uri(db), uri=True)
        try:
            if not conn.execute(_OTHER_TABLES).fetchone()[0]:
                return None
            if conn.execute("SELECT 1 FROM meta WHERE key = 'schema_version'").fetchone():
                return None   # an index (its version said where it is opened)
            return _other_programs_database(db)
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                return None   # (locked, unreadable here: said where it is opened)
            return _other_programs_database(db)
        finally:
            conn.close()
            if not had_side:
                fold_wal(db)
    except sqlite3.Error:
        return None   # (damaged: said where it is opened)




def database_of(path: Path | str) -> tuple[Path, bool] | None:
    """The SQLite database that ``path`` is, or is a side file of (its writer lock, its
    write-ahead log), and whether it holds a streamrag index; ``None`` when it is neither (a
    document). Only reads: given to `index` as a document, an index's database was read as a
    binary file, and a second index was built inside the first's folder."""
    path = Path(path)
    for db in (path, *(path.with_name(path.name[:-len(s)]) for s in _SIDE_FILES
                       if path.name.endswith(s) and len(path.name) > len(s))):
        try:
            with open(db, "rb") as f:
                if f.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                    continue
        except OSError:
            continue
        try:
            conn = sqlite3.connect(_reader_uri(db), uri=True)
            try:
                is_index = conn.execute("SELECT 1 FROM meta WHERE key = 'schema_version'").fetchone() is not None
            finally:
                conn.close()
                fold_wal(db)   # (a reader of a WAL database leaves -wal and -shm behind)
        except sqlite3.Error as e:   # no meta table; or unreadable here (a read-only folder's WAL)
            is_index = db.parent.name == ".streamrag" and "no such table" not in str(e)
        return db, is_index
    return None


def _open_error(path: Path, e: BaseException) -> StoreError:
    """One line on why the file at ``path`` cannot be used as an index, and what to do."""
    if path.is_dir():
        return StoreError(f"{path}: is a folder, not an index file; pass --db with the index's "
                          "file (e.g. DIR/.streamrag/index.db)")
    if isinstance(e, sqlite3.DatabaseError) and "not a database" in str(e):
        return foreign_file_error(path) or StoreError(
            f"{path}: not a streamrag index (not an SQLite database); give --db (or store.path) the "
            "index's file, or a path where none is yet for `streamrag index DIR` to build one there")
    if isinstance(e, sqlite3.DatabaseError) and "malformed" in str(e):
        return StoreError(f"{path}: the index database is damaged ({e}); remove it and run "
                          "`streamrag index DIR` to build it again")
    journal = path.with_name(path.name + "-journal")
    if isinstance(e, sqlite3.DatabaseError) and "readonly" in str(e) and journal.exists():
        # A reader may not roll back what a writer left half done (another program's write,
        # killed): the first writer does.
        return StoreError(f"{path}: a write another program left unfinished lies beside it "
                          f"({journal.name}), and only a writer may undo it; run `streamrag index` "
                          "on the index's folder once (nothing else need be done)")
    name = getattr(e, "sqlite_errorname", "") or ""
    full = disk_full(e) is not None or name.startswith("SQLITE_IOERR")   # (a -shm that cannot grow)
    return StoreError(f"{path}: cannot open the index database ({e}); "
                      + ("check that its disk is not full, and its permissions" if full else
                         "check the path and its permissions"))


def _not_upgraded(path: Path, applied: int, e: BaseException) -> StoreError:
    """The refusal of an index of schema ``applied`` (an older streamrag's) that a reader could
    not upgrade, ``e`` being why. On read-only media (a share, a disc, another user's folder)
    no run there can upgrade it, `index` included: the fix is a copy where the user may write."""
    why = _read_only_here(path) or (
        "the index is read-only to you" if "readonly" in str(e) or "read-only" in str(e) else None)
    if why is None:
        said = str(e).splitlines()[0] if isinstance(e, sqlite3.Error) else "read-only?"
        return StoreError(f"{path} was written by an older streamrag and cannot be upgraded here "
                          f"({said}); run `streamrag index DIR` once")
    wal = Path(f"{path}-wal")
    what = f"it with its {wal.name}" if wal.is_file() and wal.stat().st_size else "it"
    return StoreError(f"{path} was made by an older streamrag (schema {applied}, this one reads "
                      f"{SCHEMA_VERSION}) and must be upgraded once, which cannot be done where it lies "
                      f"({why}); copy {what} to a folder you may write and open the copy once there "
                      "(`streamrag status --db COPY`, or run `streamrag index` on it), then use the copy")


_IMMUTABLE_OR_APPEND = 0x10 | 0x20   # STATX_ATTR_IMMUTABLE, STATX_ATTR_APPEND: chattr +i, +a


def _immutable(path: Path) -> bool:
    """Whether the file (or folder) at ``path`` is marked immutable or append-only (``chattr +i``, ``+a``):
    no one may write it, whatever its mode, so the chmod the refusal advised changed nothing.
    False where that cannot be asked (not Linux, a file system without attributes). Asked of the
    path (statx), not of the file opened: closing a descriptor of a file drops every POSIX lock
    the process holds on it, and an ``ask`` opened its writer beside its reader's SQLite locks."""
    try:
        import ctypes

        statx = ctypes.CDLL(None, use_errno=True).statx
    except (ImportError, OSError, AttributeError, TypeError):   # (no C library to ask, no statx in it)
        return False
    found = ctypes.create_string_buffer(256)   # a struct statx: its stx_attributes at byte 8
    if statx(-100, os.fsencode(path), 0, 0, found) != 0:   # (-100: AT_FDCWD, a path as given)
        return False
    return bool(ctypes.c_uint64.from_buffer(found, 8).value & _IMMUTABLE_OR_APPEND)


def _read_only_here(path: Path) -> str | None:
    """Why this user may not write the index at ``path`` where it lies, or None if they may."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except (OSError, AttributeError):   # (no statvfs: Windows)
        pass
    if not os.access(path, os.W_OK):
        return "the file is read-only to you"
    if not os.access(path.parent, os.W_OK):
        return "its folder is read-only to you"
    return None


def read_only_here(path: Path) -> str | None:
    """Why this user may not write the index at ``path`` where it lies (``_read_only_here``), else
    None: for a command that names how to upgrade it without opening it to write."""
    return _read_only_here(path)


def _side_folder(path: Path) -> StoreError | None:
    """The refusal to write the index at ``path`` when a folder lies where SQLite keeps a file
    beside it (``index.db-shm``, ``-wal``, ``-journal``), else None: SQLite cannot make that
    file, and a -shm folder ended `index` in a traceback ("attempt to write a readonly database"),
    a -wal or -journal one in "cannot open ...; check the path and its permissions"."""
    for suffix in ("-wal", "-shm", "-journal"):
        side = Path(f"{path}{suffix}")
        if side.is_dir():
            return StoreError(f"{side}: is a folder, where SQLite keeps the index's {suffix} file; move it "
                              f"away or remove it (rm -r {shell_word(side)}), then run again")
    return None


def unwritable_here(path: Path, given: str = "--db") -> StoreError | None:
    """The refusal to write the index at ``path`` where it lies, a read-only file system or a
    folder read-only to the user (a share, a disc, another user's index), else None (a file
    read-only alone is ``Store``'s to say: its owner may chmod it). A writer makes files beside
    the index: SQLite opened it and failed with "attempt to write a readonly database; check the
    path and its permissions", or the lock file was blamed. ``given``: where the index was named."""
    if not path.is_file():
        return None
    side = [Path(f"{path}{s}") for s in ("-wal", "-shm")]
    why = _read_only_here(path)
    if why == "the file is read-only to you":
        # (both refused: the folder is the one a chmod of the file does not fix)
        why = "its folder is read-only to you" if not os.access(path.parent, os.W_OK) else None
    if why is None or why.startswith("its folder") and all(f.is_file() for f in side):
        return None   # (with its -wal and -shm there, SQLite writes it without a new file)
    fix = ""
    if why.startswith("its folder"):   # (no chmod lifts a folder's immutable mark, root's neither)
        fix = (f", or lift its folder's immutable mark (chattr -i -a {shell_word(path.parent)}, as root)"
               if _immutable(path.parent) else ", or make its folder writable")
    return StoreError(f"{path}: the index cannot be written where it lies ({why}); copy it to a folder "
                      f"you may write and give {given} the copy{fix}")


def _split_sql(script: str) -> list[str]:
    """Statements of a migration script (no semicolons inside our DDL's literals)."""
    return [s.strip() for s in script.split(";") if s.strip() and not _only_comments(s)]


def _only_comments(s: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in s.splitlines())


def check_readable(path: Path | str) -> None:
    """Raises what a reader (``Store(path, readonly=True)``) raises of an index it cannot read:
    none there, none yet, another program's database, a newer streamrag's, a damaged file; but
    leaves an older streamrag's as it lies. For a writer's look before it takes the writer lock
    (``vacuum``): the reader's look upgraded the index there, with no lock held to say
    "upgrading" to others meanwhile; the writer's own ``Store`` upgrades it under the lock."""
    Store(path, readonly=True, upgrade=False).close()


def reader_in_place(path: Path | str) -> Store | None:
    """A reader of the index at ``path``, an older streamrag's, reading it as it lies where its
    upgrade would change no row of it (``_upgrade_changes_nothing``, as a reader that cannot
    write it reads it), else None. For a command that writes nothing (``index --estimate``),
    which otherwise reads an upgraded copy: the whole index copied (372 MB, 2 s more)."""
    store = Store(path, readonly=True, upgrade=False)
    try:
        if store._upgrade_changes_nothing():
            return store
    except BaseException:
        store.close()
        raise
    store.close()
    return None


@contextlib.contextmanager
def as_it_lies(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the index at ``path`` whatever its schema: not upgraded, as a
    ``Store`` reader upgrades one an older streamrag made (for a command that writes nothing:
    ``index --estimate``). Closed as a reader is: the -wal and -shm it made are folded and removed
    when it was the last connection (``fold_wal``). Raises ``sqlite3.Error`` or ``StoreError``
    (``_readable``) when it cannot be read."""
    conn = _readable(sqlite3.connect(f"{_uri_path(path)}?mode=ro", uri=True, isolation_level=None,
                                     check_same_thread=False), path)
    _opened(path)
    try:
        yield conn
    finally:
        conn.close()
        if _closed_last(path):
            fold_wal(path)


def indexed_root(db_path: Path, given: Path | None = None) -> Path | None:
    """The folder the index at ``db_path`` names its documents from, if it still exists.

    Stored paths are relative to it, so a later run on a subfolder or one file must use it
    too: `index sub` then updates ``sub/...`` instead of taking ``sub`` for the whole folder.
    An index in its folder's ``.streamrag/`` belongs to that folder, wherever it was recorded:
    a copied folder's index updates the copy, not the original it still names. So does one
    copied with the folder ``given`` (or one above it) from elsewhere: see ``_copied_root``.
    """
    db_path = Path(db_path)
    if not db_path.is_file():
        return None
    if db_path.parent.name == ".streamrag":
        return db_path.parent.parent.resolve()
    # (read as it lies: opened as a ``Store`` reader, an index an older streamrag made was
    # upgraded on disk by `index --estimate`, which writes nothing)
    try:
        with as_it_lies(db_path) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
    except (StreamragError, sqlite3.Error, OSError):
        return None  # the run that opens it for writing says what is wrong with it
    root = row[0] if row else None
    if not root or not Path(root).is_dir():
        return None
    return _copied_root(db_path, Path(root), given) or Path(root)


def _copied_root(db_path: Path, root: Path, given: Path | None) -> Path | None:
    """The folder, ``given`` or one above it, that the index at ``db_path`` was copied (or moved)
    with from ``root``, the folder it names, which still exists: the index lies as far from that
    folder as another index naming ``root`` lies from ``root``. `cp -r pj pj2; index pj2` (the
    index pj2/index.db by store.path) took pj2's files in as another folder's beside pj's, and
    so did `index d2/christmas_carol --db d2/index.db` of a demo's folder copied. An index that
    ``root`` holds is its own (`index notes/sub` updates notes' index), and one naming ``root``
    from a place no copy of it holds takes in another folder's files, as documented."""
    db, root = db_path.resolve(), root.resolve()
    if given is None or db.is_relative_to(root) or given.resolve().is_relative_to(root):
        return None   # (a run naming the recorded folder, or a part of it, keeps it)
    for folder in (given.resolve(), *given.resolve().parents):
        original = Path(os.path.normpath(root / os.path.relpath(db, folder)))
        if original.is_file() and not original.samefile(db) and _recorded_root(original) == root:
            return folder
    return None


def reading_root(db_path: Path) -> Path | None:
    """The folder of the index at ``db_path`` given alone (--db of ask, status, export), whose
    settings they read: ``indexed_root``'s, or a copy of it by ``_copied_root``'s rule, the folder
    given being the index's own (or the folder in it named as the recorded one, a demo's
    christmas_carol), as `index pj2` takes it: `cp -r pj pj2; ask --db pj2/index.db` read pj's
    streamrag.toml. Only a folder holding the index's documents is a copy: an index copied alone
    (`cp pj/index.db backup/`) lies from backup as pj's from pj, and is still pj's."""
    root = indexed_root(db_path)
    if root is None or Path(db_path).parent.name == ".streamrag":
        return root   # (the folder holding .streamrag: a copy's already)
    near = Path(db_path).resolve().parent
    given = near / root.name if (near / root.name).is_dir() else near
    copy = _copied_root(Path(db_path), root, given)
    return copy if copy is not None and holds_documents(copy, Path(db_path)) else root


def holds_documents(folder: Path, db_path: Path) -> bool:
    """Whether ``folder`` holds one of the files the index at ``db_path`` names from its folder
    (of the first 100: a copy holds them all, a folder the index alone was copied to none)."""
    from streamrag.loader import file_of   # (the loader is a reader's: not imported by every store)

    try:
        relative = _relative_paths(db_path, 100)
    except sqlite3.Error:
        return False
    return any((folder / file_of(p)).is_file() for p in relative)


def _relative_paths(db_path: Path, limit: int) -> list[str]:
    """The first ``limit`` paths (by path) the index at ``db_path`` names from its folder, not
    absolute, looked at as ``root_and_paths`` looks, which reads them all (300,000 for 100)."""
    with _looked_at(Path(db_path)) as conn:
        return [p for (p,) in conn.execute("SELECT path FROM files WHERE path NOT LIKE '/%' ORDER BY path "
                                           "LIMIT ?", (limit,))]


def _recorded_root(db_path: Path) -> Path | None:
    """The folder the index at ``db_path`` names (resolved), or ``None`` for a file that is no index."""
    try:
        root = recorded_root(db_path)
    except sqlite3.Error:
        return None
    return Path(root).resolve() if root else None


class WriterLock:
    """The index's writer lock: a ``flock`` on ``DB.lock`` beside the (resolved) index.

    Two indexers on one index would each pay for the same calls and throw away the loser's
    version; a second ``index`` or ``watch`` is refused at once, naming the first (``what``
    says what this one is: ``streamrag watch /notes``). Readers (``ask``, ``status``) take no
    lock. The lock goes with the process, whatever way it ends; the file stays. Where there is
    no ``flock`` (Windows) nothing stops a second writer, as before.
    """

    def __init__(self, db_path: Path | str, what: str, *, given: str = "--db") -> None:
        self.db_path, self.what = db_path, what
        self.given = given   # where the index was named (--db, store.path in a file): the fix
        self.path = lock_path(db_path)
        self.file = None
        self.noted: str | None = None   # the note on the second line (``note``), written again by ``take``
        self._upgrade_noted = False     # the file says "upgrading" for ``take`` alone (``upgraded``)

    def take(self) -> None:
        """Locks, or raises WriterBusyError naming the holder; StoreError if no lock file can be made."""
        try:
            import fcntl
        except ImportError:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # (the command may name a folder that is not UTF-8: its bytes are written escaped)
            f = open(self.path, "a+", encoding="utf-8", errors="backslashreplace")
        except OSError as e:
            blocking = next((a for a in self.path.parents if a.exists() and not a.is_dir()), None)
            if blocking is not None:   # mkdir says only "File exists"
                raise StoreError(f"{blocking}: is a file, so the index cannot go under it; give --db "
                                 "(or store.path) a file in a folder") from None
            if not self.path.parent.is_dir():   # (the lock file was not what failed: its folder was)
                raise StoreError(f"{self.path.parent}: cannot make the index's folder ({e.strerror or e}); "
                                 f"give {self.given} an index in a folder you may write") from None
            if (refusal := unwritable_here(Path(self.db_path), self.given)) is not None:
                raise refusal from None   # (an index there already: named, not its lock file)
            raise StoreError(f"{self.path}: cannot make the index's lock file ({e.strerror or e}); give "
                             f"{self.given} an index in a folder you may write") from None
        # An older index is said "upgrading" from the start: this writer upgrades it once its
        # Store opens (``migrate``), and meanwhile (0.15 s of an `index`) a reader that met the
        # lock with no note advised stopping it as "an older version". Looked at before the lock
        # is taken: taken, its file names no holder until written, and the look (0.5 to 10 ms) left
        # a reader or writer meeting it then to name "another process". (An upgrade another made
        # meanwhile is found by ``migrate``, which takes the note back.)
        upgrade_noted = self.noted is None and older_schema(Path(self.db_path))
        try:
            for wait in (0.01, 0.02, 0.04, 0.08, 0):   # an older streamrag's reader looking holds
                try:                                  # it shared for a moment
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if not wait:
                        raise
                    time.sleep(wait)
        except OSError:
            f.seek(0)
            lines = _lock_lines(f.read(4096))
            f.close()
            holder = _holder_of(lines)
            doing = (", which is upgrading it (an upgrade of a large index takes a while)"
                     if _upgrading_to(lines) is not None else "")
            raise WriterBusyError(f"{shown(self.db_path)} is being written by another streamrag ({holder}){doing}; "
                                  f"{_busy_advice(self.what, holder)}") from None
        try:
            f.truncate(0)
            # (the note too: a lock taken again, its file deleted, lost it, and `ask` said no
            # update was under way during one)
            self._upgrade_noted = upgrade_noted
            noted = upgrading_note(SCHEMA_VERSION) if self._upgrade_noted else self.noted
            f.write(self._holder_line() + (f"{noted}\n" if noted else ""))
            f.flush()
        except OSError as e:   # (it was "cannot write the output")
            with contextlib.suppress(OSError):
                f.close()
            raise StoreError(f"{self.path}: cannot write the index's lock file ({e.strerror or e}); "
                             + ("free some space on its disk, then run the same command again"
                                if disk_full(e) else "check the disk holding the index")) from None
        self.release()
        self.file = f
        _writer_locks[self.path] = self

    def _holder_line(self) -> str:
        """The lock file's first line, naming its holder (a second writer says it in one line)."""
        return f"pid {os.getpid()}: {one_line(self.what)}\n"

    def note(self, words: str | None) -> None:
        """Puts ``words`` on the lock file's second line (``None``: none), below the holder's
        line, for readers to find: watch says there that an update is under way
        (``updating_note``, read by ``update_under_way``). A note that cannot be written is left
        unsaid: it is no part of the index. The holder's line is never taken off meanwhile:
        cut to nothing and written again, a second writer reading the file between the two was
        refused as "being written by another streamrag (another process)"."""
        self.noted = one_line(words) if words else None
        self._upgrade_noted = False
        if self.file is None:
            return
        holder = self._holder_line()
        with contextlib.suppress(OSError):
            self.file.flush()
            self.file.truncate(len(holder.encode("utf-8", errors="backslashreplace")))
            if self.noted:
                self.file.write(f"{self.noted}\n")   # (appended: the file is opened a+)
            self.file.flush()

    def upgraded(self) -> None:
        """The index needs no upgrade (any more): the "upgrading" ``take`` said of it goes (found
        older as the lock was taken, upgraded since by a reader of no lock, it stayed said)."""
        if self._upgrade_noted:
            self.note(self.noted)

    def check(self, *, make_folder: bool = True) -> None:
        """Takes the lock again if its file was deleted (the index's folder deleted and made
        again): another writer could otherwise lock the new file. Without ``make_folder``, a
        lock whose folder is gone is left until it is back: taking it would make the folder
        again (and the watched folder holding it, deleted a moment ago)."""
        if self.file is None:
            return
        if not make_folder and not self.path.parent.is_dir():
            return
        try:
            now = os.stat(self.path)
            held = os.fstat(self.file.fileno())
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return
        except OSError:
            pass
        self.take()

    def release(self) -> None:
        if _writer_locks.get(self.path) is self:
            del _writer_locks[self.path]
        if self.file is not None:
            self.file.truncate(0)
            self.file.close()   # closing the file lets the lock go
            self.file = None


# The writer locks this process holds, by lock file (``lock_path``): an upgrade by a ``Store`` of
# the index says so in its lock (``Store.migrate``).
_writer_locks: dict[Path, WriterLock] = {}


def _busy_advice(what: str, holder: str) -> str:
    """What to do when ``what`` (``streamrag vacuum``) finds the writer lock held by ``holder``."""
    watch = " watch " in f" {holder} "
    if what.split()[1:2] == ["vacuum"]:
        # (It was told to give itself its own index with --db, as a second indexer is: no
        # vacuum of another index shrinks this one.)
        return ("stop that watch first and start it again after the vacuum, or vacuum later"
                if watch else "vacuum once it has finished") + "; the index stays usable meanwhile"
    after = "a running `streamrag watch` keeps the index current on its own" if watch else "or wait for it to finish"
    return (f"stop that one first ({after}), or give this run its own index with --db (the lock goes "
            "with its process; its file needs no deleting)")


def writer_at_work(db_path: Path | str) -> str | None:
    """What holds the writer lock of the index at ``db_path`` (``pid 12: streamrag watch
    notes``), or ``None`` when nothing does. Only reads, and takes no lock, not even shared for
    a moment (a writer starting then was refused): the lock file's line while its lock is held,
    as /proc/locks tells, or, without /proc (macOS), fcntl's F_GETLK (``_lock_queried``);
    elsewhere, while that line's pid is alive. A writer killed with -9 leaves its line in the
    file, but no lock: a live pid alone named it still the writer when another process was given
    its pid."""
    lines = _held_lines(db_path)
    return None if lines is None else _holder_of(lines)


def updating_note(since: float, files: int) -> str:
    """The writer's note (``WriterLock.note``) of an update under way since ``since`` (Unix
    time), for ``files`` changed files."""
    return f"updating since {since:.3f}: {files} files"


def update_under_way(db_path: Path | str) -> dict | None:
    """The update the writer of the index at ``db_path`` noted under way (``updating_note``):
    ``{"since": 1796569121.5, "files": 251, "pid": 12, "command": "watch"}``; ``None`` when
    none is (no writer, or one that noted none)."""
    lines = _held_lines(db_path)
    found = lines is not None and re.fullmatch(r"updating since ([\d.]+): (\d+) files", lines[1].strip())
    if not found:
        return None
    return {"since": float(found[1]), "files": int(found[2]), **(writer_said(lines[0]) or {})}


def older_schema(db_path: Path) -> bool:
    """Whether the index at ``db_path`` is an older streamrag's, by its committed schema
    (``committed_schema``); False when it has none, or it cannot be read."""
    return 0 < (committed_schema(db_path) or SCHEMA_VERSION) < SCHEMA_VERSION


def committed_schema(db_path: Path | str) -> int | None:
    """The schema version the index at ``db_path`` holds committed, read with no lock and nothing
    made beside it; None when there is none, or it cannot be read so (``Store`` says why).

    Where a -wal holding writes and a -shm lie beside it as files (a writer at work, or one
    killed), it is read through them, read-only: an upgrade another process made, its log not
    yet folded in, is the log's alone (the file at 31, the log at 32), and the file read alone
    judged the index older. Otherwise the file is read as unchanging (``immutable``), the log, if
    any, ignored: a reader's connection would make a -shm (and a -wal) beside it, and one beside
    an index whose -shm is a folder was left there, which the writer then refuses
    (``_side_folder``). An upgrade the log alone holds then goes unread (``Store.migrate`` takes
    back the "upgrading" said of it)."""
    path = Path(db_path)
    try:
        if not path.is_file():
            return None
        wal = Path(f"{path}-wal")
        logged = wal.is_file() and Path(f"{path}-shm").is_file() and wal.stat().st_size > 0
    except OSError:   # (a folder on the way not searchable)
        return None
    # (read through the log where it cannot be, its -shm read-only to the user with no writer
    # to have set it up: the file's own schema, as before)
    for unchanging in (False, True) if logged else (True,):
        try:
            with contextlib.closing(sqlite3.connect(_reader_uri(path, unchanging=unchanging), uri=True)) as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error:
            continue
        try:
            return int(row[0]) if row else None
        except ValueError:
            return None
    return None


def upgrading_note(schema: int) -> str:
    """The writer's note (``WriterLock.note``) while it upgrades the index to ``schema``."""
    return f"upgrading to schema {schema}"


def _upgrading_to(lines: list[str]) -> int | None:
    """The schema the writer whose lock file says ``lines`` (``_held_lines``) is upgrading the
    index to (``upgrading_note``), or ``None`` when it says no upgrade."""
    found = re.fullmatch(r"upgrading to schema (\d+)", lines[1].strip())
    return int(found[1]) if found else None


def _holder_of(lines: list[str]) -> str:
    """The holder's line of ``_held_lines`` as said in a message (``writer_at_work``)."""
    return " ".join(lines[0].split()) or "another process"


def _being_upgraded(path: Path, holder: str, to: int) -> str:
    """The refusal of a reader of the index at ``path`` (an older schema) while ``holder``, its
    writer, upgrades it to schema ``to``. The schemas are said as a newer index's refusal says them
    (``_check_version``: "this one knows 32"); the holder (``pid 12: streamrag watch notes``) is
    set off by a semicolon, as its own colon is there."""
    if to == SCHEMA_VERSION:
        return (f"{path} is being upgraded for this streamrag by another ({holder}; once, and an upgrade of "
                "a large index takes a while); run this again once it is done")
    schemas = f"({holder}; to schema {to}, this one knows {SCHEMA_VERSION})"
    if to > SCHEMA_VERSION:
        return (f"{path} is being upgraded by a newer streamrag {schemas}, which this one cannot read once it "
                "is done; upgrade streamrag")
    return (f"{path} is being upgraded by an older streamrag {schemas}, and this one would have to upgrade it "
            "further while that one writes it: stop that one and start it again with this version; then run "
            "this again")


def _others_lock(db_path: Path | str) -> list[str] | None:
    """``_held_lines``, but ``None`` for a writer lock this process holds (``_writer_locks``):
    an upgrade under its own lock is no other streamrag's."""
    return None if lock_path(db_path) in _writer_locks else _held_lines(db_path)


def _held_lines(db_path: Path | str) -> list[str] | None:
    """The lock file of the index at ``db_path`` while its lock is held (see ``writer_at_work``):
    its holder's line and the note below it ("" for none); else ``None``."""
    try:
        with open(lock_path(db_path), encoding="utf-8", errors="replace") as f:
            line = f.read(4096)
            inode = os.fstat(f.fileno()).st_ino
            queried = _lock_queried(f)
    except OSError:
        return None
    found = re.match(r"pid (\d+): ", line)
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            # "1: FLOCK  ADVISORY  WRITE 12 fe:00:2195517 0 EOF": the file by its inode
            held = any(len(fields) > 5 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}")
                       for fields in map(str.split, f))
    except OSError:
        held = queried if queried is not None else found is not None and alive(int(found[1]))
    return _lock_lines(line) if held else None


def _lock_lines(text: str) -> list[str]:
    """A lock file's text as its holder's line and the note below it ("" for none)."""
    return (text.split("\n", 1) + [""])[:2]


# ``struct flock`` as fcntl's F_GETLK reads and writes it (its format and field names, in order),
# where that query sees the locks flock(2) takes: macOS, whose kernel keeps one list of a file's
# locks for both (bsd/kern/kern_lockf.c); a flock held through any open file is said there as a
# lock of another owner, l_pid -1. Linux keeps the two apart (/proc/locks tells there); elsewhere
# None: not asked.
_FLOCK_QUERY: tuple[str, tuple[str, ...]] | None = (
    ("qqihh", ("start", "len", "pid", "type", "whence")) if sys.platform == "darwin" else None)


def _lock_queried(f) -> bool | None:
    """Whether the open lock file ``f`` is locked (``WriterLock``), asked without taking any
    lock (F_GETLK: a write lock over the whole file, would it be refused?); None where that
    cannot be asked (``_FLOCK_QUERY``) or the asking failed."""
    if _FLOCK_QUERY is None:
        return None
    try:
        import fcntl
        form, names = _FLOCK_QUERY
        asked = {"start": 0, "len": 0, "pid": 0, "type": fcntl.F_WRLCK, "whence": os.SEEK_SET}
        told = dict(zip(names, struct.unpack(form, fcntl.fcntl(
            f.fileno(), fcntl.F_GETLK, struct.pack(form, *(asked[n] for n in names))))))
    except (ImportError, OSError, struct.error):
        return None
    return told["type"] != fcntl.F_UNLCK


def writers_lock() -> bool:
    """Whether writers hold ``WriterLock`` here, so that ``writer_at_work`` tells a run under way
    from one killed (not where there is no ``flock``: Windows)."""
    return importlib.util.find_spec("fcntl") is not None


def writer_said(holder: str | None) -> dict | None:
    """What ``writer_at_work`` found as ``status --json`` has it: ``{"pid": 12, "command":
    "watch"}``; None for a holder that names no streamrag command (a job's own name) or for none."""
    found = re.match(r"pid (\d+): streamrag (\S+)", holder or "")
    return {"pid": int(found[1]), "command": found[2]} if found else None


def alive(pid: int) -> bool:
    """Whether a process ``pid`` is running (someone else's too)."""
    try:
        os.kill(pid, 0)
    except PermissionError:   # (alive, someone else's)
        return True
    except OSError:
        return False
    return True


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the process's name (its state first); None where that
    cannot be read (no /proc, gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            # "12 (python3) S 1 ...": the name may hold spaces and parentheses: cut at its last ")"
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def process_stamp(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, as /proc has it), which tells it
    from a later process given the same pid; None where that cannot be read (no /proc, gone)."""
    fields = _proc_stat(pid)
    return None if fields is None else fields[19]   # (the 22nd field)


def process_gone(pid: int | None, stamp: str | None) -> bool | None:
    """Whether the process a run row names (``runs.pid`` and ``runs.process``) has ended: none
    is running with that pid, or the one that is started at another time (the pid given again).
    None where the row names none (a run of an older streamrag)."""
    if pid is None:
        return None
    if not alive(pid):
        return True
    fields = _proc_stat(pid)
    if fields is not None and fields[0] in ("Z", "X"):
        # ended, and not yet waited for by its parent (a script that killed the ask it ran):
        # os.kill still finds it, and /proc still has its start time
        return True
    return bool(stamp) and fields is not None and fields[19] != stamp


def vacuum(store: Store) -> bool:
    """Gives the index's free pages back to the disk: SQLite's VACUUM, then a checkpoint that
    empties the WAL. It runs on a thread, so that Ctrl-C (``KeyboardInterrupt``, SIGTERM's
    ``Terminated`` too) can stop it: the statement is interrupted, and, being one transaction,
    leaves the index as it was; then the interrupt goes on up. Before, the signal waited for
    the statement to end, and the command said "interrupted" about a vacuum that was done (or
    SIGTERM's default action ended it without a word).

    SQLite honours an interrupt only in the early part of a VACUUM: one that comes later is
    too late, and the vacuum finishes. Then nothing is raised, and True is returned, for the
    caller to say so. Signals that come while the thread ends are waited out: the connection
    is not the caller's again until then (a second Ctrl-C closed it under the thread, which
    crashed the process)."""
    failed: list[BaseException] = []
    stop = threading.Event()
    vacuumed = threading.Event()
    done = threading.Event()   # (not Thread.join: one a Ctrl-C interrupts takes the thread for ended)

    def work() -> None:
        try:
            if not stop.is_set():
                store.conn.execute("VACUUM")
                vacuumed.set()
                store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except BaseException as e:   # (given to the caller's thread)
            failed.append(e)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="streamrag-vacuum", daemon=True)
    try:
        worker.start()   # (the signal may come while it starts: the thread may be at work already)
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        stop.set()
        store.conn.interrupt()
        while worker.ident is not None and not done.is_set():
            try:
                done.wait()
            except KeyboardInterrupt:
                continue
        if not vacuumed.is_set():   # interrupted, or never begun: nothing changed
            raise
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # (the thread's may have been interrupted)
        return True
    if failed:
        raise failed[0]
    return False


@contextlib.contextmanager
def one_writer(db_path: Path | str, what: str, *, given: str = "--db") -> Iterator[WriterLock]:
    """Holds the index's writer lock (see ``WriterLock``) for the block."""
    lock = WriterLock(db_path, what, given=given)
    lock.take()
    try:
        yield lock
    finally:
        lock.release()
