"""How S3 storage options (s3fs's names, as `--storage-option` gives them) and the AWS_*
environment variables configure each S3 client: the defaults zarrfs gives s3fs, and the
obstore settings that mean the same, where obstore can mean the same."""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config, S3Credential, S3CredentialProvider

S3_CONNECTIONS = 64
# The storage options whose meaning obstore is given; any other is s3fs's alone.
S3_KEY_BYTES = 1024  # the longest object key S3 takes, in UTF-8 bytes
OBSTORE_OPTIONS = frozenset(
    {"endpoint_url", "key", "secret", "token", "anon", "region_name", "client_kwargs", "profile"}
)
_OBSTORE_CLIENT_KWARGS = frozenset({"endpoint_url", "region_name"})
# Credentials from botocore's chain are asked for again this often (it refreshes them).
_REFRESH = datetime.timedelta(minutes=5)


class UnsupportedByObstore(ValueError):
    """The storage options ask for something only s3fs does; the message says what."""


@dataclass
class ObstoreSettings:
    """The arguments of obstore's S3Store for one bucket: its S3Config, its ClientConfig
    and, where credentials come from botocore's chain, the callable that gives them."""

    config: S3Config
    client_options: ClientConfig
    credential_provider: S3CredentialProvider | None = field(default=None)


def endpoint_from_environment() -> str | None:
    """The S3 endpoint the AWS variables name, if any."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def add_s3fs_defaults(options: dict[str, Any], attempt_timeout: float) -> None:
    """Complete s3fs's options in place: the endpoint from the environment, no retries of
    its own, a timeout per attempt, a connection pool the read pipeline can fill."""
    client_kwargs = options.get("client_kwargs") or {}
    if "endpoint_url" not in options and "endpoint_url" not in client_kwargs:
        endpoint = endpoint_from_environment()
        if endpoint:
            options["endpoint_url"] = endpoint
    # Without this s3fs sends a HEAD before every whole-value read, to split big objects
    # into parallel ranged reads; get_partial_values already overlaps reads across keys.
    options.setdefault("max_concurrency", 1)
    # FsspecStore retries transient failures itself; botocore's own retries (up to 5
    # attempts with backoff) would multiply with them.
    config = options.setdefault("config_kwargs", {})
    config.setdefault("retries", {"total_max_attempts": 1})
    # a stalled endpoint (connections open, nothing sent) ends each attempt, so that the
    # call fails within its deadline instead of waiting on the socket for ever
    config.setdefault("connect_timeout", min(attempt_timeout, 10.0))
    config.setdefault("read_timeout", attempt_timeout)
    # botocore's default of 10 connections would cap the requests that readers keep in
    # flight (the array read pipeline sends up to 32 at once)
    config.setdefault("max_pool_connections", S3_CONNECTIONS)


def obstore_settings(options: dict[str, Any], *, timeout: float, attempts: int) -> ObstoreSettings:
    """obstore's settings for what `options` and the environment ask of S3, with each
    request bounded as s3fs's are (a stall ends an attempt; the call's deadline ends the
    request). Raises UnsupportedByObstore when only s3fs can do what they ask."""
    others = sorted(set(options) - OBSTORE_OPTIONS)
    client_kwargs = options.get("client_kwargs") or {}
    if not isinstance(client_kwargs, dict):
        others.append("client_kwargs")
        client_kwargs = {}
    others += sorted(f"client_kwargs.{name}" for name in set(client_kwargs) - _OBSTORE_CLIENT_KWARGS)
    if others:
        raise UnsupportedByObstore(f"storage options only s3fs understands: {', '.join(others)}")
    attempt_timeout = timeout / max(1, attempts)
    client_options: ClientConfig = {
        "connect_timeout": datetime.timedelta(seconds=min(attempt_timeout, 10.0)),
        "read_timeout": datetime.timedelta(seconds=attempt_timeout),  # no byte for this long
        "timeout": datetime.timedelta(seconds=timeout),  # one request, its body included
    }
    config: S3Config = {}
    endpoint = options.get("endpoint_url") or client_kwargs.get("endpoint_url") or endpoint_from_environment()
    if endpoint:
        config["endpoint"] = endpoint
        client_options["allow_http"] = endpoint.startswith("http://")
    region = (
        options.get("region_name")
        or client_kwargs.get("region_name")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )
    provider = None
    if options.get("anon"):
        config["skip_signature"] = True
    elif options.get("key") or options.get("secret"):
        config["access_key_id"] = options.get("key") or ""
        config["secret_access_key"] = options.get("secret") or ""
        if options.get("token"):
            config["session_token"] = options["token"]
    elif options.get("profile") or not os.environ.get("AWS_ACCESS_KEY_ID"):
        # obstore reads the AWS_* credential variables itself, not profiles, SSO or
        # credential_process: those come from botocore's chain, as s3fs's do
        provider, profile_region = _botocore_credentials(options.get("profile"))
        region = region or profile_region
    if not region and not endpoint:
        raise UnsupportedByObstore("the bucket's region is not known (s3fs looks it up)")
    config["region"] = region or "us-east-1"  # a custom endpoint needs a region to sign with
    return ObstoreSettings(config, client_options, provider)


def _botocore_credentials(profile: str | None) -> tuple[S3CredentialProvider | None, str | None]:
    """(a credential provider over botocore's chain, or None where it finds none, so
    that obstore tries its own; the profile's region)."""
    try:
        import botocore.session
    except ImportError:
        if profile:
            raise UnsupportedByObstore("the profile option needs botocore") from None
        return None, None
    session = botocore.session.Session(profile=profile)
    credentials = session.get_credentials()
    region = session.get_config_variable("region")
    return (None if credentials is None else _BotocoreCredentials(credentials)), region


class _BotocoreCredentials:
    """obstore's credential provider over a botocore Credentials object."""

    def __init__(self, credentials: Any) -> None:
        self._credentials = credentials
        # RefreshableCredentials renew themselves when asked; static ones never expire
        self._refreshes = hasattr(credentials, "refresh_needed")

    def __call__(self) -> S3Credential:
        frozen = self._credentials.get_frozen_credentials()
        expires = datetime.datetime.now(datetime.UTC) + _REFRESH if self._refreshes else None
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": expires,
        }
