"""The containers whose files a mount may read on a source's behalf (--virtual-chunks):
Icechunk's virtual chunk containers and the targets of references. A prefix is a URL
(`s3://bucket/prefix/`, `file:///data/`) or a local path; local ones are compared by
their real paths, so a symlink inside an authorized directory that leads out of it
leads to a file that is not authorized."""

from __future__ import annotations

import os


def container_prefix(prefix: str) -> str:
    """The URL prefix a --virtual-chunks PREFIX names (a directory: ends with "/")."""
    if "://" not in prefix:
        prefix = "file://" + os.path.abspath(prefix)
    if prefix.startswith("file://"):
        prefix = "file://" + os.path.realpath(prefix[len("file://") :])
    return prefix.rstrip("/") + "/"


def target_url(url: str) -> str:
    """A reference's target as the prefixes are compared with it (local: its real path)."""
    if "://" not in url:
        url = "file://" + os.path.abspath(url)
    if url.startswith("file://"):
        url = "file://" + os.path.realpath(url[len("file://") :])
    return url


def authorized(url: str, prefixes: list[str]) -> bool:
    target = target_url(url)
    return any(target.startswith(p) for p in prefixes)


def suggested_prefix(url: str) -> str:
    """The prefix that would authorize `url`: its directory."""
    return target_url(url).rpartition("/")[0] + "/"
