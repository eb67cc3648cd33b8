"""The decoded tree (docs/semantics.md) as a filesystem core."""

from .core import DecodedCore

__all__ = ["DecodedCore"]
