"""The chunks of one `data` (views/data.py) being decoded, for its reads or ahead of them,
and the bands (format/bands.py) they are decoded into: one table, so that a read waits for
a chunk another read or decode-ahead is decoding rather than decode it twice. Reads claim
the chunks they decode themselves (`claim`, then `settle`); decode-ahead (policy.py) starts
rows in the background (`start_decoding`) and releases the rows a reader has passed
(`release_rows`)."""

from __future__ import annotations

import functools
import itertools
import math
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, NamedTuple

from ...store import StoreUnavailableError

if TYPE_CHECKING:
    from ...format import Array
    from ...format.bands import BandFill


def stored_key(array: Array, coords: tuple[int, ...]) -> str:
    """The store key a chunk is fetched from (its shard's, for a sharded array)."""
    return str(array.stored_key(coords if array.sharding is None else array.shard_of(coords)[0]))


class Claim(NamedTuple):
    """What one read found of the chunks it needs: those another is decoding (waited for),
    those decoded into a band being filled (read from it once it is made), those it
    decodes itself (claimed: others wait for it), and the bands to wait for."""

    waiting: dict[tuple[int, ...], Future[Any]]
    in_bands: list[tuple[int, ...]]
    mine: list[tuple[int, ...]]
    claims: dict[tuple[int, ...], Future[Any]]
    band_waits: list[Future[Any]]


class ChunksInFlight:
    """Thread-safe: reads run in worker threads, several at once, and background decodes
    end on codec threads; everything here is under one leaf lock, never held while waiting."""

    def __init__(self, array: Array) -> None:
        self.array = array
        self._lock = threading.Lock()
        self._inflight: dict[tuple[int, ...], Future[Any]] = {}  # each leaves once done
        self._busy = 0  # how many of them are not done (counted, not looked for: every read asks)
        self._bands = array.bands  # a chunk row's bytes laid out whole (format/bands.py)
        self._row_busy: dict[int, int] = {}  # chunk row -> its chunks being decoded
        self._band_waits: dict[int, Future[Any]] = {}  # chunk row -> done once its band is made or given up
        self._fills: dict[int, BandFill] = {}  # chunk row -> its band being filled by decode-ahead

    # ------------------------------------------------------------ for reads
    def claim(self, coords_list: list[tuple[int, ...]]) -> Claim:
        """Sort a read's chunks: claim those nobody is decoding (settle() ends the claim)."""
        with self._lock:
            waiting = {c: f for c in coords_list if (f := self._inflight.get(c)) is not None and not f.done()}
            # decoded into a band being filled: read from it once it is made (its chunks are not cached)
            in_bands = [c for c in coords_list if c not in waiting and (f := self._fills.get(c[0])) and f.placed(c)]
            mine = [c for c in coords_list if c not in waiting and c not in in_bands]
            claims: dict[tuple[int, ...], Future[Any]] = {c: Future() for c in mine}
            self._inflight.update(claims)
            self._busy += len(claims)
            self._rows_busy(mine, 1)
            filling = {c[0] for c in [*waiting, *in_bands] if c[0] in self._fills}
            band_waits = [w for row in filling if (w := self._band_waits.get(row)) is not None]
        return Claim(waiting, in_bands, mine, claims, band_waits)

    def settle(self, claim: Claim, unanswered: StoreUnavailableError | None) -> None:
        """The read decoded its claimed chunks (or failed): those waiting on them go on."""
        with self._lock:
            for c, future in claim.claims.items():
                if self._inflight.get(c) is future:
                    del self._inflight[c]
                # a reader waiting on this chunk fails with the store's silence about
                # its own key only: the other chunks of this read may be fine
                if unanswered is not None and unanswered.key == stored_key(self.array, c):
                    future.set_exception(unanswered)
                else:
                    future.set_result(None)
            self._busy -= len(claim.claims)
            done = self._rows_busy(claim.mine, -1)
        for row in done:
            self._row_decoded(row)

    def band_waiters(self, row: int) -> list[Future[Any]] | None:
        """Where the band of `row` is being made: its wait and its chunks being decoded."""
        waiter = self._band_waits.get(row)
        if waiter is None:
            return None
        with self._lock:
            return [waiter, *(f for c, f in self._inflight.items() if c[0] == row)]

    # ------------------------------------------------------ for decode-ahead
    def needs_decoding(self, coords: tuple[int, ...]) -> bool:
        """Neither decoded (in the cache) nor being decoded."""
        with self._lock:
            if coords in self._inflight or coords[0] in self._fills:
                return False
        if self._bands is not None and self._bands.band(coords[0]) is not None:
            return False  # its row's band holds it
        cache = self.array.context.cache
        return cache is None or cache.get((self.array.path, coords)) is None

    def banded(self) -> bool:
        """Whether the array's chunk rows are laid out in bands (format/bands.py): decode-ahead
        then starts a row's chunks together, each decoded into the row's band."""
        return self._bands is not None

    def decoding(self) -> int:
        """How many chunks are being decoded in the background or for reads."""
        return self._busy

    def start_decoding(self, coords_list: list[tuple[int, ...]]) -> None:
        """Fetch and decode these chunks in the background (the I/O stage fetches, the
        codec pool decodes) into the cache, or, where their row is laid out in a band, into
        the band (allocated here, filled by the codec threads as each chunk is decoded,
        published once the row is done: _row_decoded); reads of them meanwhile wait for
        them. Stored chunks only: reads overlay the pending writes themselves."""
        with self._lock:
            wanted = [c for c in coords_list if c not in self._inflight]
            if not wanted:
                return
            bands = self._bands
            if bands is not None:  # readers of these rows wait for their bands, not their chunks
                for row in dict.fromkeys(c[0] for c in wanted):
                    if row not in self._fills and bands.band(row) is None:
                        self._fills[row] = bands.begin(row)
                    self._band_waits.setdefault(row, Future())
            into = [c for c in wanted if c[0] in self._fills]
            fills = [self._fills[c[0]] for c in into]
            cached = [c for c in wanted if c[0] not in self._fills]
            try:
                futures = self.array.start_reads(cached) if cached else []
                if into:
                    futures += self.array.start_reads(
                        into, lambda i, chunk: fills[i].place(into[i], chunk), cached=False
                    )
            except BaseException as exc:  # (the pools shut down at unmount, say)
                failed: BaseException | None = exc
                abandoned = [self._abandon(row) for row in dict.fromkeys(c[0] for c in wanted)]
            else:
                failed = None
                wanted = cached + into
                self._inflight.update(zip(wanted, futures))
                self._busy += len(futures)
                self._rows_busy(wanted, 1)
        if failed is not None:  # nothing is decoding those rows: their readers read them themselves
            for fill, waiter in abandoned:
                if fill is not None:
                    fill.drop()
                if waiter is not None:
                    waiter.set_result(None)
            raise failed
        for coords, future in zip(wanted, futures):  # one already done calls back at once: not under the lock
            future.add_done_callback(functools.partial(self._decoded_ahead, coords))

    def release_rows(self, first: int, end: int) -> None:
        """Drop the chunks of grid rows `first` to `end` (excluded) from the cache: a
        streaming reader has passed them (the kernel's page cache holds what it read of
        them). Rows of more chunks than the cache holds are found among its entries: a
        row's chunk count is the metadata's to choose, and may be vast."""
        cache = self.array.context.cache
        if cache is None or end <= first or not self.array.current():
            return  # (what is kept is of the node there now)
        path, grid = self.array.path, self.array.chunk_grid.grid_shape
        if self._bands is not None:
            generation = cache.generation(path)
            dropped = cache.discard(self._bands.key(row, generation) for row in range(first, end))
            self.array.context.stats.add("bands_passed", dropped)
        if (end - first) * math.prod(grid[1:]) > cache.entry_count():
            dropped = cache.discard_where(path, lambda coords: first <= coords[0] < end)
        else:
            dropped = cache.discard(
                (path, (row, *rest))
                for row in range(first, end)
                for rest in itertools.product(*(range(n) for n in grid[1:]))
            )
        self.array.context.stats.add("cache_passed", dropped)

    # ------------------------------------------------------------- in here
    def _rows_busy(self, coords_list: list[tuple[int, ...]], step: int) -> list[int]:
        """(Under _lock.) Count chunks being decoded per row; the rows left with none."""
        done = []
        for coords in coords_list:
            row = coords[0]
            left = self._row_busy.get(row, 0) + step
            if left > 0:
                self._row_busy[row] = left
            else:
                self._row_busy.pop(row, None)
                done.append(row)
        return done

    def _row_decoded(self, row: int) -> None:
        """No chunk of `row` is being decoded any more: its band, where one is being filled
        (or where all its chunks are in the cache, decoded by reads of their own), is
        completed from the cache and published, else dropped; then the readers waiting for
        it go on (on the thread that decoded the last chunk, a worker's)."""
        bands = self._bands
        if bands is None:
            return
        with self._lock:
            if self._row_busy.get(row):
                return
            waiter = self._band_waits.pop(row, None)
            fill = self._fills.pop(row, None)
        try:
            if fill is None and bands.band(row) is None and self._all_cached(row):
                fill = bands.begin(row)
            if fill is not None and not (fill.complete() and fill.publish()):
                fill.drop()
        finally:
            if waiter is not None:
                waiter.set_result(None)

    def _all_cached(self, row: int) -> bool:
        cache, path = self.array.context.cache, self.array.path
        assert self._bands is not None and cache is not None
        return all(cache.get((path, c)) is not None for c in self._bands.row_chunks(row))

    def _abandon(self, row: int) -> tuple[BandFill | None, Future[Any] | None]:
        """(Under _lock.) Give up the band fill of `row` and its readers' wait, where no
        chunk of it is being decoded: the fill (to drop) and the wait (to end)."""
        if self._row_busy.get(row):
            return None, None
        return self._fills.pop(row, None), self._band_waits.pop(row, None)

    def _decoded_ahead(self, coords: tuple[int, ...], future: Future[Any]) -> None:
        failed = None if future.cancelled() else future.exception()
        with self._lock:
            self._busy -= 1
            if self._inflight.get(coords) is future:
                del self._inflight[coords]
            done = self._rows_busy([coords], -1)
            # the store did not answer it: readers of its row fail now, and later ones read
            # the row's chunks themselves (failing at once while the store stays silent)
            waiter = self._band_waits.pop(coords[0], None) if isinstance(failed, StoreUnavailableError) else None
        if waiter is not None:
            waiter.set_exception(failed)
        for row in done:
            self._row_decoded(row)
