"""How close the LLM client gets to the throughput its rate limit allows.

Sends ``--requests`` distinct chat requests (no cache) at once and lets the client's limiters and
concurrency slots pace them. By default it runs against the in-process simulator
(``streamrag.simulator``) with the same ``--rpm`` as the client, so a client that overshoots gets
429s and pays for them in retries. Prints one JSON line:

    requests, errors, wall_s, bound_s, efficiency = bound_s / wall_s, ...

``bound_s`` is the time the rate limit and latency alone require:
``max(60 * ((requests - 1) // rpm), requests * latency / concurrency) + latency``. A limit counts
requests over a sliding minute and an idle client may send a whole minute's budget at once, so
request ``k`` cannot go before ``60 * (k // rpm)`` seconds; below ``rpm`` requests the run is
bound by latency and concurrency only. (The client's window is 61 s, a second of margin for the
way to the server, so a run longer than a minute ends slightly above the bound.)

    python bench/llm_client.py                              # simulator, 500 requests, 3000 rpm
    python bench/llm_client.py --requests 150 --rpm 120     # past a minute's budget (~61 s)
    python bench/llm_client.py --api-base http://localhost:8000/v1 --model my-model --rpm 600
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import anyio
from _harness import add_port_option, simulator_thread   # (it puts the checkout on sys.path)

from streamrag.config import LLMSettings
from streamrag.errors import LLMError
from streamrag.llm import LLMClient


async def run(api_base: str, api_key: str, args: argparse.Namespace,
              on_warm: Callable[[], None] = lambda: None) -> dict:
    settings = LLMSettings(api_base=api_base, requests_per_minute=args.rpm, tokens_per_minute=0,
                           concurrency=args.concurrency, cache=False,
                           request_timeout_s=args.timeout_s)
    latencies: list[float] = []
    errors: list[str] = []

    async def one(i: int | str, timed: bool = True) -> None:
        messages = [{"role": "user", "content": f"Benchmark request {i}: name one colour."}]
        try:
            result = await llm.chat(messages, model=args.model, stage="bench",
                                    max_tokens=args.max_tokens)
            if timed:
                latencies.append(result.latency_ms)
        except LLMError as e:
            errors.append(str(e))

    async with LLMClient(settings, api_key) as llm:
        # Warm up: open every pooled connection once (the server side pays one-time costs per
        # connection, e.g. the simulator's handler thread builds its tokenizer state), then let
        # the rate bucket drain so the timed run starts from an idle client.
        if args.warm_up:
            async with anyio.create_task_group() as tg:
                for i in range(args.concurrency):
                    tg.start_soon(one, f"warm-up {i}", False)
            await anyio.sleep(1.5)
            errors.clear()
            on_warm()
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(args.requests):
                tg.start_soon(one, i)
        wall = time.perf_counter() - started
    return {"wall_s": wall, "latencies": latencies, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--rpm", type=int, default=3000, help="client limit (and the simulator's)")
    p.add_argument("--latency-ms", type=int, default=200, help="simulator latency")
    p.add_argument("--concurrency", type=int, default=LLMSettings().concurrency)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--timeout-s", type=float, default=30.0)
    p.add_argument("--warm-up", action="store_true",
                   help="open every connection once before timing (default: time from a cold start)")
    p.add_argument("--api-base", help="run against this endpoint instead of the simulator")
    p.add_argument("--model", default="gpt-4o-mini")
    p.add_argument("--api-key-env", default="STREAMRAG_API_KEY")
    add_port_option(p)
    args = p.parse_args(argv)
    if args.requests < 1:   # (none timed in no time: an efficiency of 1869)
        p.error("--requests must be 1 or more")

    if args.api_base:
        api_key = os.environ.get(args.api_key_env, "")
        result = anyio.run(run, args.api_base.rstrip("/"), api_key, args)
        server = None
    else:
        with simulator_thread(args.port, latency_ms=args.latency_ms, rpm=args.rpm) as sim:
            result = anyio.run(run, sim.base_url, "sk-bench", args, sim.reset)
            server = sim.stats()

    latencies = result["latencies"]
    # The simulator's latency is known; another server's is what we measured.
    latency_s = (args.latency_ms if server is not None else
                 statistics.median(latencies) if latencies else 0.0) / 1000
    n = args.requests
    rate_bound = 60.0 * ((n - 1) // args.rpm) if args.rpm and n else 0.0
    bound = max(rate_bound, n * latency_s / args.concurrency) + latency_s
    wall = result["wall_s"]
    line = {
        "bench": "llm_client",
        "api_base": args.api_base or "simulator",
        "requests": n,
        "errors": len(result["errors"]),
        "rpm": args.rpm,
        "concurrency": args.concurrency,
        "latency_ms": round(latency_s * 1000, 1),
        "wall_s": round(wall, 3),
        "bound_s": round(bound, 3),
        "efficiency": round(bound / wall, 3),
        "warm_up": args.warm_up,
        "achieved_rpm": round(60 * (n - len(result["errors"])) / wall, 1),
    }
    if server is not None:
        line["server_requests"] = server["requests"]
        line["rejected_429"] = server["rejected"]
    print(json.dumps(line))
    if result["errors"]:
        print(f"first error: {result['errors'][0]}", file=sys.stderr)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
