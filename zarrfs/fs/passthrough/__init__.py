"""The passthrough tree (docs/semantics.md, `--raw`) as a filesystem core."""

from .core import PassthroughCore

__all__ = ["PassthroughCore"]
