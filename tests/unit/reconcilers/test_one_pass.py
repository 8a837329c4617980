"""reconcilers/effects.one_pass: a pass whose write was refused as stale comes back by itself.

A refused write (Conflict on the resourceVersion precondition) is recorded on the pass it happened in,
its concurrent sub-tasks included, and never on another pass; the pass's own Result keeps whatever
earlier time it asked for.
"""

from __future__ import annotations

import asyncio

from sampledb_operator.model.result import Result
from sampledb_operator.reconcilers.effects import LOOK_AGAIN_AFTER_CONFLICT, one_pass, write_refused


async def _refusing(result: Result | None) -> Result | None:
    write_refused()
    return result


async def test_a_pass_without_a_refusal_keeps_its_result() -> None:
    async def quiet() -> Result | None:
        return None

    async def later() -> Result | None:
        return Result(requeue_after=300.0)

    assert await one_pass(quiet()) is None
    assert await one_pass(later()) == Result(requeue_after=300.0)


async def test_a_refusal_makes_the_pass_look_again_at_the_earliest_time_asked() -> None:
    assert await one_pass(_refusing(None)) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    assert await one_pass(_refusing(Result(requeue_after=300.0))) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    assert await one_pass(_refusing(Result(requeue_after=0.05))) == Result(requeue_after=0.05)
    assert await one_pass(_refusing(Result(requeue=True))) == Result(requeue=True)  # comes back anyway


async def test_a_refusal_in_a_sub_task_counts_and_stays_within_its_pass() -> None:
    async def concurrent() -> Result | None:
        await asyncio.gather(asyncio.sleep(0), _refusing(None))
        return None

    assert await one_pass(concurrent()) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)

    async def quiet() -> Result | None:
        return None

    assert await one_pass(quiet()) is None  # the earlier pass's refusal is not this one's
    write_refused()  # outside any pass: nothing to record it on, and nothing breaks


async def test_concurrent_passes_each_keep_their_own_record() -> None:
    release = asyncio.Event()

    async def refuses_late() -> Result | None:
        await release.wait()
        write_refused()
        return None

    async def quiet() -> Result | None:
        await release.wait()
        return None

    both = asyncio.gather(one_pass(refuses_late()), one_pass(quiet()))
    release.set()
    assert await both == [Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT), None]
