"""The passthrough tree (SPEC §4, `--raw`) as a filesystem core."""

from .core import PassthroughCore

__all__ = ["PassthroughCore"]
