"""Key rules of the store: keys are "/"-separated relative names, prefixes are "" or end
in "/". Names starting with TEMP_PREFIX are reserved for the local store's atomic writes."""

from __future__ import annotations

import os
import secrets
import socket

from .errors import InvalidKeyError

TEMP_PREFIX = ".zarrfs-tmp-"
# the host that names this process's temporary files (stale_temporaries.py)
HOST = socket.gethostname().replace("/", "_")


def temporary_name() -> str:
    """A name for a temporary file: the reserved prefix, the host and process that write
    it (so that the next mount knows it stale once that process is gone), random bits."""
    return f"{TEMP_PREFIX}{HOST}.{os.getpid()}.{secrets.token_hex(8)}"


def validate_key(key: str) -> str:
    """Return `key` if it is a valid key, else raise InvalidKeyError."""
    if not isinstance(key, str) or not key:
        raise InvalidKeyError("a key must be a non-empty string", repr(key))
    if key.startswith("/"):
        raise InvalidKeyError("a key must not start with '/'", key)
    if key.endswith("/"):
        raise InvalidKeyError("a key must not end with '/'", key)
    if "\0" in key:
        raise InvalidKeyError("a key must not contain NUL", key)
    for segment in key.split("/"):
        if not segment:
            raise InvalidKeyError("a key must not contain '//'", key)
        if segment in (".", ".."):
            raise InvalidKeyError("a key must not contain '.' or '..' segments", key)
        if segment.startswith(TEMP_PREFIX):
            raise InvalidKeyError(f"names starting with {TEMP_PREFIX!r} are reserved", key)
    return key


def is_valid_key(key: str) -> bool:
    """Whether a name a listing returned is a key (temporary files of atomic writes are not)."""
    try:
        validate_key(key)
    except InvalidKeyError:
        return False
    return True


def validate_prefix(prefix: str) -> str:
    """Return `prefix` if it is "" or a valid key followed by "/", else raise InvalidKeyError."""
    if prefix == "":
        return prefix
    if not isinstance(prefix, str) or not prefix.endswith("/"):
        raise InvalidKeyError("a prefix must be '' or end with '/'", repr(prefix))
    validate_key(prefix[:-1])
    return prefix


def join_path(parent: str, name: str) -> str:
    """`name` below `parent`, where "" is the root: for keys, node paths and the mount's
    paths alike (no validation; join_key validates)."""
    return f"{parent}/{name}" if parent else name


def ancestors(path: str) -> list[str]:
    """The groups above the node at `path`, nearest first, the root ("") last."""
    out = []
    while path:
        path = path.rpartition("/")[0]
        out.append(path)
    return out


def join_key(*parts: str) -> str:
    """Join key fragments with single slashes ("a/", "b" -> "a/b") and validate the result."""
    return validate_key("/".join(part.strip("/") for part in parts if part.strip("/")))
