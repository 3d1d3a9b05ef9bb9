"""Moving blob bytes between a socket and a file without stalling the event loop.

The event loop receives and parses HTTP; hashing and disk I/O release the GIL, so they
run in a worker thread while the loop keeps receiving. Two rules keep this safe:

* Every size check happens on the loop, as each chunk arrives (:meth:`Spool.admit`),
  so an oversized upload is refused at the first byte too many, exactly as before.
* At most one batch is in the worker thread while the next one is being collected,
  so memory stays bounded by about ``2 * BATCH_BYTES`` per transfer, whatever the
  blob size.

Batches amortise the cost of a thread hand-off (tens of microseconds) over a few MiB
instead of paying it per 64-256 KiB network read.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Final

import anyio
from anyio.abc import ObjectReceiveStream

from hypertrain.relay.spool import Spool

BATCH_BYTES: Final = 1 << 20


async def spool_stream(spool: Spool, body: AsyncIterable[bytes]) -> None:
    """Feed ``body`` into ``spool``: sizes checked on the loop, hash + write in a thread.

    On any error the worker thread is allowed to finish its batch before this returns
    (so the caller may then safely :meth:`Spool.abort`), and the first error is raised.
    """
    send, receive = anyio.create_memory_object_stream[list[bytes]](0)
    failure: list[BaseException] = []
    async with anyio.create_task_group() as group:
        group.start_soon(_absorb_batches, spool, receive, failure)
        async with send:
            try:
                batch: list[bytes] = []
                size = 0
                async for chunk in body:
                    spool.admit(len(chunk))
                    batch.append(chunk)
                    size += len(chunk)
                    if size >= BATCH_BYTES:
                        await send.send(batch)
                        batch, size = [], 0
                if batch:
                    await send.send(batch)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the worker stopped early; its error is in ``failure``
            except Exception as exc:  # raised below, outside the task group
                failure.append(exc)
    if failure:
        raise failure[0]


async def _absorb_batches(
    spool: Spool, receive: ObjectReceiveStream[list[bytes]], failure: list[BaseException]
) -> None:
    async with receive:
        async for batch in receive:
            try:
                await anyio.to_thread.run_sync(spool.absorb, batch)
            except Exception as exc:
                failure.append(exc)
                return
