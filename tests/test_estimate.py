"""``index --estimate`` against the runs that follow it: chunks extracted by a run that never
published (interrupted, or a watcher's extraction ahead of its sync) still cost their summaries
and reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamrag.estimate import estimate, format_estimate
from streamrag.pipeline import Indexer, sync

pytestmark = pytest.mark.anyio


def paid(stats: dict, stage: str) -> int:
    """The calls of ``stage`` a run paid for (``stats``: its ``llm``, stage by stage)."""
    s = stats.get(stage, {"calls": 0, "cached": 0})
    return s["calls"] - s["cached"]


async def extract_only(paths: list[Path], settings, db: Path, root: Path) -> int:
    """What a run stopped after extracting leaves: every extraction stored, nothing published."""
    return await Indexer(settings, db, root=root).prefetch(paths)


async def test_chunks_extracted_but_never_published_still_cost_their_summaries_and_reports(
        corpus, tmp_path, sim_settings):
    # A first run stopped while summarizing: the estimate said "0 chunks to extract ... total
    # 0 calls", and the next run made every summary and report call.
    db = tmp_path / "index.db"
    extracted = await extract_only([corpus], sim_settings, db, corpus)
    assert extracted > 4
    est = estimate([corpus], sim_settings, db, root=corpus)
    done = await sync([corpus], sim_settings, db, root=corpus)
    assert done.chunks_extracted == 0 and done.chunks_reused == extracted
    for stage in ("summarize", "report"):
        asked = est["llm"]["by_stage"].get(stage, {}).get("calls", 0)
        assert paid(done.llm, stage) > 0 and asked >= paid(done.llm, stage) / 2, (stage, asked)
    assert est["chunks_to_extract"] == 0 and "extract" not in est["llm"]["by_stage"]
    assert est["chunks_unpublished"] == extracted
    assert f"0 chunks to extract (and {extracted} extracted by an earlier run, not yet published)" \
        in format_estimate(est)
    # Published: nothing is due any more.
    after = estimate([corpus], sim_settings, db, root=corpus)
    assert after["chunks_unpublished"] == 0 and after["llm"]["calls"] == 0


async def test_an_update_extracted_but_never_published_still_costs_its_summaries_and_reports(
        corpus, tmp_path, sim_settings):
    db = tmp_path / "index.db"
    await sync([corpus], sim_settings, db, root=corpus)
    (corpus / "tides.txt").write_text(
        "The Tide Office of Port Vell publishes the spring tide tables each March. Harbormaster "
        "Edda Lind signs them, and the Harbor Council posts them on the Old Quay.\n\n"
        "In the year of the Spring Storm the tables were late, and the ferry Blue Heron ran aground "
        "near the Kessel Bridge while Edda Lind was away in Kessel.\n")
    extracted = await extract_only([corpus], sim_settings, db, corpus)
    assert extracted >= 1
    est = estimate([corpus], sim_settings, db, root=corpus)
    done = await sync([corpus], sim_settings, db, root=corpus)
    assert paid(done.llm, "summarize") > 0 and paid(done.llm, "report") > 0
    assert {"summarize", "report"} <= est["llm"]["by_stage"].keys(), est["llm"]
    assert est["chunks_to_extract"] == 0 and est["chunks_unpublished"] == extracted
    after = estimate([corpus], sim_settings, db, root=corpus)
    assert after["chunks_unpublished"] == 0 and after["llm"]["calls"] == 0
