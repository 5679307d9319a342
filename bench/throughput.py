"""How close indexing gets to the time its provider's limits allow. Prints one JSON line.

    python bench/throughput.py --corpus DIR --latency-ms 400 --rpm 600 --tpm 300000

The simulator runs in its own process with that latency and enforces those limits (429 above
them); the client is configured with the same limits. ``bound_s`` is what the limits and the
latency on the critical path alone require:

    max(chat_calls / (rpm / 60), tokens / (tpm / 60), critical_path_s)

where ``critical_path_s`` is the latency of the longest chain of calls that must follow each
other: extraction, the gleaning check and round (each if the run made one), one summary, then
one report per level that has LLM reports (deeper levels first). ``efficiency = bound_s / wall_s`` (the figure GraphRAG
is compared by in ../shared/anchors.md). The simulator answers a call in ``--latency-ms`` plus
``--per-token-ms`` per token of its answer, so each call of the chain counts that of the
shortest answer its stage's calls got (``least_completion_tokens``).

With ``--api-base`` the latency is the endpoint's, not ``--latency-ms`` (the simulator's,
``latency_ms`` then null): each call of the chain counts the shortest answering time measured
of its stage's calls (``least_latency_ms``, the request alone, not its wait for the rate limit;
the burst bound's one call the shortest of them), and ``critical_path_s`` is null, the bound
the rates' alone, when a stage of it had no call answered.

Providers, the simulator and streamrag's client count a sliding minute, so a client may send a
whole minute's budget at once and beat that smooth-rate bound (efficiency above 1). The least
time the sliding minute allows is ``burst_bound_s``, the full minutes the calls and tokens need
plus one call, and no less than the critical path or the latency of all calls over the
concurrency (``chat_calls x latency / concurrency``, with the simulator each call's own);
``burst_efficiency = burst_bound_s / wall_s``. With no rate limit (``--rpm 0 --tpm 0``) and no
latency (``--latency-ms 0 --per-token-ms 0``) nothing bounds the run: both efficiencies are null, and
``efficiency_unknown`` says why.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import time
from pathlib import Path

import anyio
from _harness import add_port_option, emit, folder, peak_rss_mb, simulator_process

from streamrag.config import load_settings
from streamrag.pipeline import sync
from streamrag.store import Store


def critical_path_stages(paid: dict[str, int], report_levels: int) -> list[str]:
    """The stage of each call of the longest chain that must follow each other, of the stages
    the run paid for: extraction, a gleaning check and a gleaning round if any chunk had them, a
    summary if any, then one report per level of LLM reports. (Counting every gleaning round the
    settings allow made the bound longer than runs whose checks said no: 15 s for a 13.1 s run.)"""
    return (["extract"] + [s for s in ("glean_check", "glean", "summarize") if paid.get(s, 0) > 0]
            + ["report"] * report_levels)


def critical_path_calls(paid: dict[str, int], report_levels: int) -> int:
    """The calls of the longest chain that must follow each other (``critical_path_stages``)."""
    return len(critical_path_stages(paid, report_levels))


def critical_path_s(least_ms: dict[str, float], stages: list[str]) -> float | None:
    """The least time the chain of ``stages`` takes at the answering times an endpoint was
    measured at (``least_ms``: each stage's shortest answered call, in ms); None when a stage
    of it had no call answered, so no time measured."""
    if any(s not in least_ms for s in stages):
        return None
    return sum(least_ms[s] for s in stages) / 1000


def simulated_least_ms(latency_ms: float, per_token_ms: float, least_completion: dict[str, int],
                       stages: list[str]) -> dict[str, float]:
    """What each of ``stages`` answers in at least on the simulator, in ms: its latency plus its
    per-token latency times the shortest answer (``least_completion``: completion tokens) its
    stage's calls got; the latency alone for a stage none of whose calls answered. (The bound
    counted ``latency_ms`` alone: harbor at ``--latency-ms 0 --per-token-ms 2`` was bound by
    nothing, no efficiency, for a 5.3 s run; now 2.26 s.)"""
    return {s: latency_ms + per_token_ms * least_completion.get(s, 0) for s in stages}


def unbounded(bound_s: float, path_s: float | None) -> str | None:
    """Why no efficiency can be given, when nothing bounds the run's time (``bound_s`` 0: no
    rate limit, and no latency on its critical path, ``path_s`` None when none was measured);
    else None. (Its efficiency was 0.0, as if the run had been infinitely slow.)"""
    if bound_s > 0:
        return None
    latency = "no latency (--latency-ms 0)" if path_s is not None else \
        "no latency measured (no call of the critical path answered)"
    return f"no rate limit (--rpm 0 --tpm 0) and {latency}: nothing bounds the run's time but its own work"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, type=folder)
    ap.add_argument("--latency-ms", type=float, default=400)
    ap.add_argument("--per-token-ms", type=float, default=0.0)
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--tpm", type=int, default=300000)
    ap.add_argument("--concurrency", type=int, default=25)
    ap.add_argument("--api-base", help="measure this endpoint instead (latency then is its own)")
    ap.add_argument("--model")
    add_port_option(ap)
    args = ap.parse_args()

    overrides = {"llm": {"requests_per_minute": args.rpm, "tokens_per_minute": args.tpm,
                         "concurrency": args.concurrency}, "pipeline": {"extract_workers": args.concurrency,
                                                                         "summary_workers": args.concurrency,
                                                                         "report_workers": args.concurrency}}
    if args.model:
        overrides["llm"].update({f"{j}_model": args.model for j in ("extraction", "summary", "report")})
    env = {k: v for k, v in os.environ.items() if k != "STREAMRAG_API_BASE"}
    settings = load_settings(None, env=env, overrides=overrides)
    flags = {"latency_ms": args.latency_ms, "per_token_ms": args.per_token_ms, "rpm": args.rpm, "tpm": args.tpm}
    with tempfile.TemporaryDirectory() as tmp:
        if args.api_base:
            settings.llm.api_base = args.api_base
            base = contextlib.nullcontext(args.api_base)
        else:
            base = simulator_process(args.port, **flags)
        with base as url:
            settings.llm.api_base = url
            db = Path(tmp) / "index.db"
            started = time.monotonic()
            result = anyio.run(lambda: sync([args.corpus], settings, db, root=args.corpus, command="bench"))
            wall = time.monotonic() - started
        store = Store(db, readonly=True)
        calls = store.scalar("SELECT count(*) FROM llm_calls WHERE cached = 0 AND error IS NULL")
        tokens = store.scalar("SELECT sum(prompt_tokens + completion_tokens) FROM llm_calls WHERE cached = 0") or 0
        retried = store.scalar("SELECT count(*) FROM llm_calls WHERE error IS NOT NULL")
        report_levels = store.scalar(
            "SELECT count(DISTINCT c.level) FROM communities c JOIN reports r ON r.key = c.report_key "
            "WHERE r.extractive = 0") or 0
        paid = {r["stage"]: r["n"] for r in store.query(
            "SELECT stage, count(*) AS n FROM llm_calls WHERE cached = 0 GROUP BY stage")}
        # (the answering request alone, not its wait for the rate limit or a free slot)
        least_ms = {r["stage"]: r["ms"] for r in store.query(
            "SELECT stage, min(latency_ms) AS ms FROM llm_calls WHERE cached = 0 AND error IS NULL "
            "GROUP BY stage")}
        least_completion = {r["stage"]: r["n"] for r in store.query(
            "SELECT stage, min(completion_tokens) AS n FROM llm_calls WHERE cached = 0 AND error IS NULL "
            "GROUP BY stage")}
        completion = store.scalar("SELECT sum(completion_tokens) FROM llm_calls "
                                  "WHERE cached = 0 AND error IS NULL") or 0
        store.close()
    stages = critical_path_stages(paid, report_levels)
    chain = len(stages)
    if args.api_base:   # (--latency-ms is the simulator's: an endpoint's latency is what was measured)
        path_s = critical_path_s(least_ms, stages)
        per_call = min((least_ms[s] for s in stages if s in least_ms), default=0) / 1000
        busy_s = calls * per_call
    else:
        path_s = critical_path_s(simulated_least_ms(args.latency_ms, args.per_token_ms, least_completion,
                                                    stages), stages)
        per_call = (args.latency_ms + args.per_token_ms * min(least_completion.values(), default=0)) / 1000
        busy_s = (calls * args.latency_ms + args.per_token_ms * completion) / 1000
    bound_rate = max(calls / (args.rpm / 60) if args.rpm else 0, tokens / (args.tpm / 60) if args.tpm else 0)
    bound = max(bound_rate, path_s or 0)
    # The provider counts a sliding minute, and so does the client: an idle client may send a
    # whole minute's budget at once. The least time that allows: the last minute's calls start
    # once the earlier full minutes have passed, and concurrency caps calls in flight.
    minutes = max((calls - 1) // args.rpm if args.rpm and calls else 0,
                  math.ceil(tokens / args.tpm) - 1 if args.tpm and tokens else 0)
    burst_bound = max(60 * minutes + per_call, path_s or 0, busy_s / args.concurrency)
    why_not = unbounded(bound, path_s)
    emit({"bench": "throughput", "corpus": str(args.corpus),
          "latency_ms": None if args.api_base else args.latency_ms,
          "per_token_ms": None if args.api_base else args.per_token_ms,
          "rpm": args.rpm, "tpm": args.tpm, "concurrency": args.concurrency, "chat_calls": calls,
          "tokens": tokens, "failed_calls": retried, "critical_path_calls": chain,
          "critical_path_s": None if path_s is None else round(path_s, 2),
          **({"least_latency_ms": {s: round(ms, 1) for s, ms in least_ms.items()}} if args.api_base else
             {"least_completion_tokens": least_completion}),
          "wall_s": round(wall, 2), "bound_s": round(bound, 2),
          "efficiency": None if why_not else round(bound / wall, 3),
          "burst_bound_s": round(burst_bound, 2), "burst_efficiency": None if why_not else round(burst_bound / wall, 3),
          **({"efficiency_unknown": why_not} if why_not else {}),
          "entities": result.entities, "reports": result.reports, "peak_rss_mb": peak_rss_mb()})


if __name__ == "__main__":
    main()
