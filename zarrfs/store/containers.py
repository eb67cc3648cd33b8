"""The containers whose files a mount may read on a source's behalf (--virtual-chunks):
Icechunk's virtual chunk containers and the targets of references. A prefix is a URL
(`s3://bucket/prefix/`, `file:///data/`) or a local path; local ones are compared by
their real paths, so a symlink inside an authorized directory that leads out of it
leads to a file that is not authorized. Remote ones are compared with their dot segments
(`..`, `%2e%2e`) resolved, as an HTTP client resolves them before it asks."""

from __future__ import annotations

import json
import os
import posixpath
import re
import tomllib
import urllib.parse
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

# The containers a mount authorizes, each with the storage options its files are read
# with (empty: the environment's credentials and endpoint, as for the source).
VirtualChunks = Mapping[str, Mapping[str, Any]]
NO_CONTAINERS: VirtualChunks = MappingProxyType({})


def container_prefix(prefix: str) -> str:
    """The URL prefix a --virtual-chunks PREFIX names (a directory: ends with "/")."""
    if "://" not in prefix:
        prefix = "file://" + os.path.abspath(prefix)
    if prefix.startswith("file://"):
        prefix = "file://" + os.path.realpath(prefix[len("file://") :])
    else:
        prefix = _resolved(prefix)
    return prefix.rstrip("/") + "/"


def target_url(url: str) -> str:
    """A reference's target as the prefixes are compared with it (local: its real path)."""
    if "://" not in url:
        url = "file://" + os.path.abspath(url)
    if url.startswith("file://"):
        return "file://" + os.path.realpath(url[len("file://") :])
    return _resolved(url)


def _resolved(url: str) -> str:
    """A remote URL with the dot segments of its path resolved (its query kept as is)."""
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    path, mark, query = re.split(r"([?#])", path, maxsplit=1) if re.search(r"[?#]", path) else (path, "", "")
    decoded = re.sub(r"%2[eE]", ".", path)
    segments = decoded.split("/")
    if "." not in segments and ".." not in segments:
        return url
    resolved = posixpath.normpath("/" + decoded).lstrip("/")
    if resolved and segments[-1] in ("", ".", ".."):
        resolved += "/"
    return f"{scheme}://{host}{slash}{resolved}{mark}{query}"


def _decoded(url: str) -> str:
    """A remote URL's text percent-decoded (`%2f` a slash), as an HTTP server reads it."""
    return url if url.startswith("file://") or "://" not in url else urllib.parse.unquote(url)


def authorized(url: str, prefixes: list[str]) -> bool:
    """Whether `url` lies under one of `prefixes`: by its text (an S3 key is read as it is
    written) and by its text decoded (an HTTP server decodes `%2f`, then resolves `..`)."""
    return all(any(target_url(form).startswith(p) for p in prefixes) for form in (url, _decoded(url)))


def suggested_prefix(url: str) -> str:
    """The prefix that would authorize `url`: its directory."""
    return target_url(_decoded(url)).rpartition("/")[0] + "/"


def read_containers_file(path: str) -> dict[str, dict[str, Any]]:
    """The containers a --virtual-chunks-file names: a JSON object (TOML where the name
    ends in .toml) mapping each container prefix to an object of its storage options.
    ValueError says in one line what is wrong with it."""
    kind = "TOML" if path.endswith(".toml") else "JSON"
    try:
        with open(path, "rb") as f:
            text = f.read().decode()
        data = tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{path} is not {kind}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{path} maps no container prefix to its storage options")
    for prefix, options in data.items():
        if not prefix.strip() or not isinstance(options, dict):
            raise ValueError(f"{path}: {prefix!r} maps to {type(options).__name__}, not an object of storage options")
    return data
