"""What the adapter keeps of the kernel's side of a session: the inode numbers it handed
out, the notifier that tells the kernel what changed, the request counters. It is made
before the core, whose hooks reach it (`core_hooks`), and needs neither pyfuse3 nor
trio to be made: the command line makes it while the source opens."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..hooks import CoreHooks
from ..inodes import InodeTable
from .pages import KernelNotifier


class KernelState:
    """`inodes` is shared with the notifier's thread; `counters` are the trio thread's."""

    def __init__(self) -> None:
        self.inodes = InodeTable()
        self.notifier = KernelNotifier(self.inodes)
        self.counters: Counter[str] = Counter(errors=0)  # shown before the first

    def session_stats(self) -> dict[str, Any]:
        return {**self.counters, **self.notifier.pushed, "inodes": len(self.inodes)}

    def core_hooks(self, storing: Callable[[int], None] | None = None) -> CoreHooks:
        """The hooks of the core the adapter serves; `storing`: who is told, at
        shutdown, how many bytes are left to store (none: nobody)."""
        hooks = CoreHooks(changed=self.notifier.forget_path, session_stats=self.session_stats)
        return hooks if storing is None else replace(hooks, storing=storing)
