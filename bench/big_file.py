"""What one big file costs an offline index: time and peak memory against the file's size.

Writes a file of ``--mb`` megabytes (``--kind``: lines of words drawn with a fixed seed by default,
or a note, records, ... of them: the same file every run), indexes its folder with ``streamrag
index --offline`` in a child process, and reads that process's peak resident memory, and that of
indexing a file of a few kilobytes of the same kind the same way (the process's own baseline:
Python, the imports, the tokenizer). A folder a daemon watches may hold a log or a dump far
larger than any article: this is what such a file asks of the machine. Then the file is changed
twice, each change followed by an update of the index: a record appended at its end (a log that
grows), and one word changed in its middle. Prints ONE JSON line:

    {"bench": "big_file", "kind", "file_mb", "chunks", "wall_s", "peak_rss_mb", "baseline_rss_mb",
     "peak_over_file", "append_s", "append_cpu_s", "middle_s", "middle_cpu_s"}

``peak_over_file`` is the peak above the baseline divided by the file's size: how many times its
size the index needs in memory at once. ``append_s`` and ``middle_s`` are the updates' wall times,
``*_cpu_s`` their processes' CPU (user + system): what a change costs, against the first index's.

    python bench/big_file.py --mb 100
    python bench/big_file.py --mb 25 --kind csv
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import ROOT, emit

WORDS = ("the river council harbor ledger merchant quietly north trade grain vessel Aurelia "
         "Tessaly ministry signed accord").split()


# What a big file may be: a log or a dump of lines (txt), written on Windows (crlf), a note
# (md: headings, quotes, lists, links, wikilinks, code), rows of records with a text field
# (jsonl, csv), or a book on one line (line).
KINDS = ("txt", "crlf", "md", "jsonl", "csv", "line")


def write_file(path: Path, mb: float, kind: str = "txt") -> int:
    """A file of ``kind`` (``KINDS``) of words drawn with a fixed seed, up to ``mb`` megabytes;
    returns the bytes written."""
    rng = random.Random(1)
    target = int(mb * 1_000_000)
    written = 0

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    with path.open("w", encoding="utf-8", newline="") as f:
        if kind == "csv":
            f.write("id,title,text\r\n")
        k = 0
        while written < target:
            k += 1
            if kind in ("txt", "crlf", "line"):
                part = words(14) + "." + {"txt": "\n", "crlf": "\r\n", "line": " "}[kind]
            elif kind == "md":
                part = [f"## {words(3)}\n\n", f"> {words(20)}.\n> [[{words(1)}#{words(1)}]] {words(5)}.\n\n",
                        "".join(f"- {words(6)} [[{words(1)}|{words(2)}]]\n" for _ in range(4)) + "\n",
                        f"```\n{words(8)} [[not a link]]\n```\n\n",
                        f"{words(40)} [{words(1)}](https://example.org/{k}) and `{words(1)}` {words(30)}.\n\n",
                        ][k % 5]
            elif kind == "jsonl":
                part = json.dumps({"id": k, "title": f"Record {k}", "text": f"{words(50)}.\n\n{words(40)}."}) + "\n"
            elif kind == "csv":
                part = f'{k},Record {k},"{words(50)}, {words(10)}.\n\n{words(40)}."\r\n'
            else:
                raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
            f.write(part)
            written += len(part)
    return written


def big_file(folder: Path, kind: str) -> Path:
    return folder / f"big.{'txt' if kind in ('crlf', 'line') else kind}"


def run_index(folder: Path) -> tuple[float, float, float]:
    """``streamrag index FOLDER --offline`` in a child process: its seconds, CPU seconds and peak
    resident memory in MB."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "streamrag", "index", str(folder), "--offline", "-q"],
                             cwd=folder.parent, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"streamrag index {folder} failed (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def change(path: Path, kind: str, where: str) -> None:
    """``where`` = "end": a record of ``kind`` appended; "middle": the first word "river" past
    the file's middle written "rivers" (a word of a text field whatever the kind)."""
    data = path.read_bytes()
    if where == "end":
        record = {"jsonl": '{"id": 0, "title": "Added", "text": "the river council met again."}\n',
                  "csv": '0,Added,"the river council met again."\r\n', "crlf": "the river council met again.\r\n",
                  "line": "the river council met again. ", "md": "\nThe river council met again.\n"}
        path.write_bytes(data + record.get(kind, "the river council met again.\n").encode())
    else:
        at = data.index(b" river ", len(data) // 2)
        path.write_bytes(data[:at] + b" rivers " + data[at + len(b" river "):])


def index(work: Path, name: str, mb: float, kind: str = "txt") -> tuple[int, int, float, float]:
    """Indexes a folder of one file of ``kind`` of ``mb`` megabytes in a child process: the
    bytes, chunks, seconds, and the child's peak resident memory in MB."""
    folder = work / name
    folder.mkdir()
    size = write_file(big_file(folder, kind), mb, kind)
    wall, _, peak = run_index(folder)
    conn = sqlite3.connect(f"file:{folder / '.streamrag' / 'index.db'}?mode=ro", uri=True)
    try:
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()
    return size, chunks, wall, peak


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=100.0, help="the file's size in megabytes (default 100)")
    p.add_argument("--kind", choices=KINDS, default="txt",
                   help="what the file holds (default txt: lines; crlf: lines ended by CRLF; md: a note; "
                        "jsonl, csv: records; line: a book on one line)")
    args = p.parse_args(argv)
    if not args.mb > 0:   # (a file of nothing has no middle to change: ValueError 'subsection not found')
        p.error("--mb must be more than 0")
    with tempfile.TemporaryDirectory() as tmp:
        *_, baseline_mb = index(Path(tmp), "small", 0.005, args.kind)
        size, chunks, wall, peak_mb = index(Path(tmp), "big", args.mb, args.kind)
        updates = {}
        for where, name in (("end", "append"), ("middle", "middle")):
            change(big_file(Path(tmp) / "big", args.kind), args.kind, where)
            updates[f"{name}_s"], updates[f"{name}_cpu_s"], _ = run_index(Path(tmp) / "big")
    file_mb = size / 1_000_000
    emit({"bench": "big_file", "kind": args.kind, "file_mb": round(file_mb, 1), "chunks": chunks, "wall_s": round(wall, 2),
          "peak_rss_mb": round(peak_mb, 1), "baseline_rss_mb": round(baseline_mb, 1),
          "peak_over_file": round((peak_mb - baseline_mb) / file_mb, 2),
          **{k: round(v, 2) for k, v in updates.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
