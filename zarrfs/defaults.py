"""Defaults that more than one layer takes: each value named once, here (a leaf module,
cheap to import: the command line's help shows them)."""

# seconds metadata and listings are served from cache before they are read again
# (--metadata-ttl)
METADATA_TTL = 10.0
# seconds: the deadline of one store call, its retries included; then EIO (--timeout)
STORE_TIMEOUT = 30.0
