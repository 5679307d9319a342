"""Whether `streamrag watch` stays healthy over many changes: memory, file descriptors, the
index and its log, and the time from a change to its idle line. Prints one JSON line.

    python bench/watch_soak.py --changes 300 --docs 200 --offline
    python bench/watch_soak.py --changes 100 --docs 200 --port 19300-19309

``python -m streamrag watch DIR --json`` runs as a daemon of its own (this checkout's code) on a
corpus made by ``../shared/tools/corpusgen.py`` (or a copy of ``--corpus DIR``). Once its
initial sync is idle, N changes are made one at a time, cycling add (a document not in the
folder yet), modify (a line of a document replaced: its size stays), delete and rename, each
waiting for the idle line that follows it (``--interval-s`` more between them). After each,
the daemon's resident memory (``/proc/PID/status``), its open file descriptors
(``/proc/PID/fd``), and the sizes of the index and its write-ahead log are read.

``rss_growth_mb_per_100`` is the slope of least-squares lines through the memory after each of
the second half's changes (the first half lets caches fill), per 100 changes, fitted over
``rss_growth_changes`` changes: one slope, each kind of change at a level of its own, as the
memory steps with the kind (after a rename it sits 1.4 MB below the others). Through all the
points at once, that step made a few dozen changes' slope mostly noise.
``rss_growth_noise_mb_per_100`` is twice its standard error (null below 6 changes fitted, too
few to tell), and ``rss_growth_beyond_noise`` says whether the slope is larger (growth, or a
leak, rather than the wobble; null with the noise). Latency (from the
change written to its idle line: ``quiet_s`` and the debounce included) is given for the first
and the last tenth of the changes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _harness import ROOT, add_port_option, emit, generate_corpus, simulator_process

_KINDS = ("add", "modify", "delete", "rename")
_MARK = "Soak note "   # the line a modification replaces (the document's size stays)
_NOTED = 8             # documents modified, at most: then the same ones again


def make_corpus(args: argparse.Namespace, out: Path, spare: int) -> list[Path]:
    """The corpus in ``out``; returns ``spare`` documents kept out of it, for the adds."""
    source = out.parent / "source"
    if args.corpus:
        shutil.copytree(args.corpus, source)
    else:
        generate_corpus("watch_soak.py", args.corpusgen, source, seed=args.seed, scale=args.docs,
                        docs=args.docs + spare)
    files = sorted(p for p in source.iterdir() if p.is_file() and p.suffix in (".txt", ".md"))
    if len(files) < 2:
        sys.exit(f"watch_soak.py: {args.corpus or source} holds fewer than 2 .txt or .md documents")
    # (from --corpus, a quarter of its documents at most: the adds then bring deleted ones back)
    keep = len(files) - min(spare, max(1, len(files) // 4)) if args.corpus else min(args.docs, len(files))
    out.mkdir()
    for f in files[:keep]:
        shutil.copy2(f, out / f.name)
    return files[keep:]


class Changes:
    """The scripted changes: add, modify, delete, rename, in turn. What the folder holds stays
    about the same size (an add and a delete each cycle; a modification replaces its line, in
    ``_NOTED`` documents at most), so that what grows is the daemon's, not the content's."""

    def __init__(self, folder: Path, spare: list[Path]) -> None:
        self.folder = folder
        self.spare = list(spare)
        self.deleted: list[str] = []   # texts deleted: added again under a new name once spares run out
        self.noted: set[str] = set()   # the documents holding a modification's line

    def _docs(self) -> list[Path]:
        return sorted(p for p in self.folder.iterdir() if p.is_file() and p.suffix in (".txt", ".md"))

    def make(self, i: int) -> str:
        """Makes change ``i``; returns its kind."""
        kind = _KINDS[i % len(_KINDS)]
        docs = self._docs()
        victim = docs[(i * 7919) % len(docs)]   # spread over the folder, the same every run
        if kind == "add":
            if self.spare:
                src = self.spare.pop(0)
                (self.folder / src.name).write_text(src.read_text())
            else:   # (a document back from the trash)
                text = self.deleted.pop(0) if self.deleted else victim.read_text()
                (self.folder / f"soak_added_{i:06d}.txt").write_text(text)
        elif kind == "modify":
            noted = sorted(self.noted)
            if len(noted) >= _NOTED:
                victim = self.folder / noted[(i // len(_KINDS)) % len(noted)]
            victim.write_text(_unmarked(victim.read_text()) +
                              f"\n{_MARK}{i}: Teodor Maskell signed ledger {i} at the quay.\n")
            self.noted.add(victim.name)
        elif kind == "delete":
            if len(docs) < 2:
                return self.make(i + 1)
            self.deleted.append(_unmarked(victim.read_text()))
            self.noted.discard(victim.name)
            victim.unlink()
        else:
            moved = victim.with_name(f"{victim.stem.split('__r')[0]}__r{i:06d}{victim.suffix}")
            victim.rename(moved)
            if victim.name in self.noted:
                self.noted.remove(victim.name)
                self.noted.add(moved.name)
        return kind


def _unmarked(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith(_MARK))


class Watch:
    """``streamrag watch DIR --json`` in a process of its own; its JSON lines in a queue."""

    def __init__(self, folder: Path, config: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMRAG_", "OPENAI_"))}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", str(folder), "--json",
                                          "--config", str(config)], stdout=subprocess.PIPE, stderr=err,
                                         text=True, env=env, cwd=ROOT)
        self.lines: queue.Queue[dict | None] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("state") == "error":
                self.errors.append(event.get("message", ""))
            self.lines.put(event)
        self.lines.put(None)

    def idle(self, timeout: float) -> dict:
        """The next idle line (its wait bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"no idle line within {timeout:g}s; see {self.log}") from None
            if event is None:
                raise RuntimeError(f"watch ended (exit {self.proc.wait()}): "
                                   f"{self.log.read_text()[-2000:] or 'no message'}")
            if event.get("state") == "idle":
                return event

    def sample(self, db: Path) -> dict:
        pid = self.proc.pid
        rss_kb = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
        wal = Path(f"{db}-wal")
        return {"rss_mb": rss_kb / 1024, "fds": len(os.listdir(f"/proc/{pid}/fd")),
                "db_mb": db.stat().st_size / 1e6 if db.exists() else 0.0,
                "wal_mb": wal.stat().st_size / 1e6 if wal.exists() else 0.0}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _by_kind(ys: list[float], kinds: list[str | None] | None) -> list[list[tuple[int, float]]]:
    """The points (change number, memory) of each kind of change, in order of first seen."""
    groups: dict[str | None, list[tuple[int, float]]] = {}
    for x, y in enumerate(ys):
        groups.setdefault(kinds[x] if kinds else None, []).append((x, y))
    return list(groups.values())


def _fit(ys: list[float], kinds: list[str | None] | None) -> tuple[float, float, int, float] | None:
    """The least-squares slope of ``ys`` (per change) with one level per kind of change
    (``kinds``, one for each of ``ys``; None: one level for all), the sum of squares of its
    residuals, their degrees of freedom, and the sum of squares of the change numbers about
    their kinds' means; None when no kind has two points (no slope within a kind to fit)."""
    groups = _by_kind(ys, kinds)
    centred = []
    for points in groups:
        mx, my = sum(x for x, _ in points) / len(points), sum(y for _, y in points) / len(points)
        centred += [(x - mx, y - my) for x, y in points]
    sxx = sum(dx * dx for dx, _ in centred)
    if not sxx:
        return None
    b = sum(dx * dy for dx, dy in centred) / sxx
    return b, sum((dy - b * dx) ** 2 for dx, dy in centred), len(ys) - len(groups) - 1, sxx


def slope_per_100(ys: list[float], kinds: list[str | None] | None = None) -> float:
    """The least-squares slope of ``ys`` (one per change), per 100 changes: with ``kinds`` (the
    kind of each change), of a line through each kind's points at a level of its own, so that
    the memory's step with the kind of change is no part of it (the line through all points
    when no kind has two)."""
    fit = _fit(ys, kinds) or _fit(ys, None)
    return 100 * fit[0] if fit else 0.0


def slope_noise_per_100(ys: list[float], kinds: list[str | None] | None = None) -> float | None:
    """Twice the standard error of ``slope_per_100(ys, kinds)`` (about a 95% band), from how
    far the points lie off its lines; None when too few points are left to tell (below 3 with
    one kind; no kind with two, or no point more than the lines need, with ``kinds``). A slope
    within it is the memory's wobble from change to change, not growth: 8 changes offline gave
    -25.5 MB per 100 of an RSS that moved 1 MB up and down with the change's kind. (Fitted
    through all the points, that step with the kind was counted as noise: 60 changes of 50
    documents offline said 0.45 +- 2.83 MB per 100, within noise, of a memory that grew after
    every kind of change, 0.77 +- 0.45 fitted a kind at a time.)"""
    fit = _fit(ys, kinds)
    if fit is None or fit[2] < 1:
        return None
    _, off, freedom, sxx = fit
    return 200 * math.sqrt(off / freedom / sxx)


def latency(values: list[float]) -> dict:
    if not values:
        return {"median": None, "p95": None}
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 3),
            "p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 3)}


def summary(samples: list[dict], latencies: list[float]) -> dict:
    """The figures of the JSON line from ``samples`` (the first after the initial sync, then one
    after each change, its ``kind`` said) and the ``latencies`` of the changes."""
    rss = [s["rss_mb"] for s in samples]
    kinds = [s.get("kind") for s in samples]
    cut = 1 + (len(rss) - 1) // 2 if len(rss) > 2 else 0   # (the first: the initial sync's)
    half, half_kinds = rss[cut:], kinds[cut:]
    tenth = max(1, len(latencies) // 10)
    first, last = samples[0], samples[-1]
    growth, noise = slope_per_100(half, half_kinds), slope_noise_per_100(half, half_kinds)
    return {"rss_mb": {"first": round(first["rss_mb"], 1), "last": round(last["rss_mb"], 1),
                       "max": round(max(rss), 1)},
            "rss_growth_mb_per_100": round(growth, 2),
            "rss_growth_changes": len(half) if len(rss) > 2 else len(rss) - 1,
            "rss_growth_noise_mb_per_100": None if noise is None else round(noise, 2),
            "rss_growth_beyond_noise": None if noise is None else abs(growth) > noise,
            "db_mb": {"first": round(first["db_mb"], 2), "last": round(last["db_mb"], 2)},
            "wal_mb": {"first": round(first["wal_mb"], 2), "last": round(last["wal_mb"], 2),
                       "max": round(max(s["wal_mb"] for s in samples), 2)},
            "fds": {"first": first["fds"], "last": last["fds"], "max": max(s["fds"] for s in samples)},
            "latency_s": {"first_tenth": latency(latencies[:tenth]),
                          "last_tenth": latency(latencies[-tenth:])}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--changes", type=int, default=300, help="changes made, one at a time")
    ap.add_argument("--docs", type=int, default=200, help="documents corpusgen makes (not with --corpus)")
    ap.add_argument("--corpus", type=Path, help="copy this folder instead (one document per add, a quarter "
                                                "of them at most, kept out for the adds)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--corpusgen", type=Path, metavar="PATH",
                    help="the corpus generator (default: ../shared/tools/corpusgen.py beside the checkout)")
    ap.add_argument("--offline", action="store_true", help="no LLM: NLP extraction, extractive reports")
    ap.add_argument("--api-base", help="this OpenAI-compatible endpoint instead of the simulator")
    ap.add_argument("--interval-s", type=float, default=0.0, help="pause after each change's idle line")
    ap.add_argument("--quiet-s", type=float, default=0.2, help="the daemon's watch.quiet_s")
    ap.add_argument("--debounce-ms", type=int, default=50, help="the daemon's watch.debounce_ms")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="longest wait for an idle line")
    ap.add_argument("--trace", type=Path, metavar="FILE", help="also write each change's figures here, "
                                                               "a JSON line each")
    add_port_option(ap)
    args = ap.parse_args()
    if args.changes < 1:
        ap.error("--changes must be 1 or more")
    if args.corpus is not None and not args.corpus.is_dir():
        ap.error(f"--corpus {args.corpus}: no such folder")

    # A SIGTERM ends it as Ctrl-C does: the daemon and the simulator it started are stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    spare = -(-args.changes // len(_KINDS))   # one per add
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folder = tmp / "corpus"
        changes = Changes(folder, make_corpus(args, folder, spare))
        docs = len(changes._docs())
        config = tmp / "streamrag.toml"   # (outside the folder: the daemon follows the one in it)
        text = (f"[watch]\nquiet_s = {args.quiet_s}\ndebounce_ms = {args.debounce_ms}\n"
                "[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n")
        if args.offline:
            text += 'api_base = ""\n[index]\nextractor = "nlp"\n'
        else:
            api_base = args.api_base or stack.enter_context(simulator_process(args.port))
            text += f"api_base = {json.dumps(api_base)}\n"
        config.write_text(text)
        db = folder / ".streamrag" / "index.db"
        watch = Watch(folder, config, tmp / "watch.log")
        stack.callback(watch.stop)
        started = time.monotonic()
        idle = watch.idle(args.timeout_s)
        initial_s = time.monotonic() - started
        samples = [watch.sample(db)]
        latencies: list[float] = []
        kinds: dict[str, list[float]] = {k: [] for k in _KINDS}
        for i in range(args.changes):
            t = time.monotonic()
            kind = changes.make(i)
            idle = watch.idle(args.timeout_s)
            took = time.monotonic() - t
            latencies.append(took)
            kinds[kind].append(took)
            samples.append({**watch.sample(db), "kind": kind})
            if args.trace:
                with open(args.trace, "a") as f:
                    f.write(json.dumps({"change": i, "latency_s": round(took, 3),
                                        "sync_s": idle.get("took_s"), **samples[-1]}) + "\n")
            if args.interval_s:
                time.sleep(args.interval_s)
        code = watch.stop()
        stopped = None
        while (event := watch.lines.get(timeout=10)) is not None:
            if event.get("state") == "stopped":
                stopped = event.get("message")
        emit({"bench": "watch_soak", "docs": docs, "changes": args.changes, "offline": args.offline,
              "api_base": None if args.offline else api_base, "quiet_s": args.quiet_s,
              "initial_sync_s": round(initial_s, 2), "documents_last": idle.get("documents"),
              **summary(samples, latencies),
              "latency_median_by_kind_s": {k: latency(v)["median"] for k, v in kinds.items()},
              "errors": len(watch.errors), "error_lines": watch.errors[:5], "exit": code, "stopped": stopped,
              "took_s": round(time.monotonic() - started, 1)})


if __name__ == "__main__":
    main()
