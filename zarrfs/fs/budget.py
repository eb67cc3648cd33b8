"""The daemon's memory budget, `--memory-target`, shared out once, here, into what each
part of a mount may hold at most (docs/configuration.md, "Memory"). Imports nothing: the
command line makes it before it forks the daemon."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryBudget:
    """The shares of one mount's memory target, in bytes. The decoded tree draws on the
    chunk cache, write buffers, scratch files, upload parts and metadata (15/16 of the
    target); a `--raw` mount on read-ahead, upload parts and metadata."""

    target: int
    chunk_cache: int  # decoded chunks kept, decode-ahead's included (--cache-size: given)
    readahead: int  # bytes fetched ahead of `--raw` sequential readers
    write_buffers: int  # writes to `data` not yet stored (stored once full)
    scratch_files: int  # scratch files (editors' and tools' temporaries) held in memory
    upload_parts: int  # parts of multipart uploads in flight
    metadata: int  # what is kept of the store's listings and nodes

    @classmethod
    def of(cls, target: int, cache_size: int | None = None) -> MemoryBudget:
        """`target`: --memory-target; `cache_size`: --cache-size where given (then the
        chunk cache's share, whatever the target)."""
        return cls(
            target=target,
            chunk_cache=target // 2 if cache_size is None else cache_size,
            readahead=target // 4,
            write_buffers=target // 8,
            scratch_files=target // 16,
            upload_parts=target // 8,
            metadata=target // 8,
        )
