"""Many items at once: a fixed number of workers take items in order; results keep the input order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any


async def run_pool(
    items: Sequence[Any],
    start: Callable[[Any], Awaitable[Any]],
    *,
    size: int,
    return_exceptions: bool,
    done: Callable[[], None],
) -> list[Any]:
    """`await start(item)` for every item with at most `size` in progress; `done()` after each.

    An item that fails raises (the others are cancelled, and coroutines never started are closed so
    Python does not warn about them) unless `return_exceptions`, which puts the exception in its place.
    """
    results: list[Any] = [None] * len(items)
    pending = iter(range(len(items)))
    started: set[int] = set()

    async def worker() -> None:
        for index in pending:
            started.add(index)
            try:
                results[index] = await start(items[index])
            except Exception as exc:
                if not return_exceptions:
                    raise
                results[index] = exc
            done()

    workers = [asyncio.create_task(worker()) for _ in range(min(len(items), size))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        for index, item in enumerate(items):
            if index not in started and asyncio.iscoroutine(item):
                item.close()
        raise
    return results
