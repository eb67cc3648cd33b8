"""Retries of transient store failures (StoreUnavailableError) within each call's deadline,
with exponential backoff: the one policy of the stores that reach a remote service."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..defaults import STORE_TIMEOUT
from .errors import StoreUnavailableError, translate_error

log = logging.getLogger(__name__)

T = TypeVar("T")


class Retries:
    """At most `attempts` tries of an operation that fails with StoreUnavailableError; the
    n-th retry waits `delay * 2**(n-1)` seconds, and none starts once `timeout` seconds
    have passed since the call began (its deadline)."""

    def __init__(self, url: str, *, attempts: int = 3, delay: float = 0.1, timeout: float = STORE_TIMEOUT) -> None:
        self.url = url
        self.attempts = max(1, attempts)
        self.delay = delay
        self.timeout = timeout

    def deadline(self) -> float:
        """The deadline of a call that begins now, in time.monotonic() seconds."""
        return time.monotonic() + self.timeout

    def call(
        self, key: str, operation: Callable[..., T], *args: Any, deadline: float | None = None, **kwargs: Any
    ) -> T:
        """Run `operation`, retrying transient failures before `deadline` (default: the
        timeout from now); raise its failure as a StoreError about `key`."""
        deadline = self.deadline() if deadline is None else deadline
        attempt = 0
        while True:
            try:
                return operation(*args, **kwargs)
            except Exception as exc:
                error = translate_error(exc, key)
                attempt += 1
                if not isinstance(error, StoreUnavailableError):
                    raise error from exc
                if self.gives_up(attempt, deadline):
                    raise exhausted(error, attempt) from exc
                log.debug("%s: retrying %s: %s", self.url, key, error.message)
            self.backoff(attempt - 1)

    def gives_up(self, attempts_made: int, deadline: float) -> bool:
        """Whether a call that has failed `attempts_made` times is to fail now."""
        return attempts_made >= self.attempts or time.monotonic() >= deadline

    def backoff(self, attempt: int) -> None:
        """Wait before retry number `attempt` + 1."""
        if self.delay:
            time.sleep(self.delay * 2**attempt)


def exhausted(error: StoreUnavailableError, attempts: int) -> StoreUnavailableError:
    """The error a call fails with after its last attempt."""
    return StoreUnavailableError(f"{error.message} (after {attempts} attempts)", error.key)
