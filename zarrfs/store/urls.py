"""What a source names: a local path or a URL, and whether that URL reaches a remote store
(an object store or a web server: listing is slow there, and consolidated metadata stands
in for it)."""

from __future__ import annotations

REMOTE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "http", "https"})


def is_url(source: str) -> bool:
    """A URL, chained ones included (`simplecache::s3://…`), rather than a local path."""
    return "://" in source or "::" in source


def is_remote(url: str) -> bool:
    """Whether `url` (a store's) names an object store or a web server."""
    protocol, separator, _ = url.partition("://")
    return bool(separator) and protocol in REMOTE_PROTOCOLS
