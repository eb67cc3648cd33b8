"""The decoded tree (SPEC §2, §3) as a filesystem core."""

from .core import DecodedCore

__all__ = ["DecodedCore"]
