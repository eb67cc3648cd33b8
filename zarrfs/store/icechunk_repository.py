"""Icechunk repositories (docs/formats.md): how one is recognised by its layout, opened from a
local path or an s3:// URL, and what it holds besides keys: branches, tags, snapshots,
the log of a branch, and a Store for any one version of it (icechunk_store.py)."""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .containers import NO_CONTAINERS, VirtualChunks, container_prefix, target_url
from .errors import KeyNotFoundError, StoreError
from .icechunk_library import EventLoopThread, check_spec_readable, first_line, rearranger
from .icechunk_store import IcechunkStore

log = logging.getLogger(__name__)

BRANCHES, TAGS, SNAPSHOTS = "branches", "tags", "snapshots"
_S3 = ("s3", "s3a")


@dataclass(frozen=True)
class SnapshotEntry:
    id: str
    written_at: datetime.datetime
    message: str

    def log_line(self) -> str:
        when = self.written_at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{self.id}  {when}  {' '.join(self.message.split())}"


def layout_spec(names: set[str], prefixes: set[str]) -> int | None:
    """The on-disk spec of the Icechunk repository whose root a listing shows, or None if
    it shows none: snapshots beside `refs/` (spec 1) or beside one `repo` object holding
    the refs (spec 2, written by icechunk 2), and no Zarr metadata of its own."""
    if names & {"zarr.json", ".zgroup", ".zarray"} or "snapshots" not in prefixes:
        return None
    if "repo" in names:
        return 2
    return 1 if "refs" in prefixes else None


def icechunk_spec(url: str, list_root: Any) -> int | None:
    """The on-disk spec of the Icechunk repository at `url`, or None if it holds none.
    `list_root()` lists the root as (names, prefixes) (one listing: cheap on any store);
    local paths are listed here."""
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    if protocol not in ("file", *_S3):
        return None
    try:
        if protocol == "file":
            path = _local_path(url)
            entries = list(os.scandir(path)) if os.path.isdir(path) else []
            names = {e.name for e in entries if e.is_file()}
            prefixes = {e.name for e in entries if e.is_dir()}
        else:
            keys, dirs = list_root()
            names, prefixes = set(keys), set(dirs)
    except Exception:
        return None
    return layout_spec(names, prefixes)


class IcechunkRepository:
    """One opened repository. Its sessions' coroutines run on one private event loop;
    repository calls (refs, logs) block the calling thread; Icechunk's Repository is
    safe to share between threads."""

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        timeout: float = 60.0,
        spec: int = 1,
        virtual_chunks: VirtualChunks = NO_CONTAINERS,
    ) -> None:
        try:
            import icechunk
        except ImportError:
            raise StoreError(
                "an Icechunk repository needs the icechunk package: pip install 'zarrfs[icechunk]'", url
            ) from None
        check_spec_readable(spec, url)
        if "ICECHUNK_LOG" not in os.environ:
            icechunk.set_logs_filter("error")  # its warnings would go to a daemon's /dev/null
        self.url = url
        self.timeout = timeout
        try:
            storage = _storage(url, dict(storage_options or {}))
            self.repo = self._unauthorized = icechunk.Repository.open(storage)
            authorized = authorized_containers(self.repo, virtual_chunks)
            if authorized:
                self.repo = icechunk.Repository.open(
                    storage,
                    config=_containers_config(self.repo, authorized),
                    authorize_virtual_chunk_access=icechunk.containers_credentials(
                        {prefix: _credentials(o) for prefix, o in authorized.items()}
                    ),
                )
            # local containers are confined as a store root is: checked per version opened
            self._local_containers = [p for p in authorized if p.startswith("file://")]
        except Exception as exc:
            if "v2 format" in str(exc):  # icechunk 1's own word for a layout not seen above
                check_spec_readable(2, url)
            raise StoreError(f"cannot open the Icechunk repository: {first_line(exc)}", url) from None
        self.loop = EventLoopThread()

    def close(self) -> None:
        self.loop.close()

    # ------------------------------------------------------------------ versions
    def open_version(
        self, *, ref: str | None = None, snapshot: str | None = None, read_only: bool = False
    ) -> IcechunkStore:
        """The store a mount's root shows: the head of branch `main`, a branch or tag
        named by `ref`, or one snapshot. Only a branch, not read-only, can be written."""
        if ref and snapshot:
            raise StoreError("give a ref or a snapshot, not both", self.url)
        if snapshot:
            return self.snapshot_store(self.resolve(SNAPSHOTS, snapshot))
        name = ref or "main"
        if name in self.names(BRANCHES):
            if read_only:
                return self.snapshot_store(self.resolve(BRANCHES, name), label=f"branch {name}")
            return self._branch_store(name)
        if name in self.names(TAGS):
            return self.snapshot_store(self.resolve(TAGS, name), label=f"tag {name}")
        raise KeyNotFoundError(f"no branch or tag {name!r} in the repository", self.url)

    def _branch_store(self, branch: str) -> IcechunkStore:
        def renew() -> Any:
            return self._session(lambda repo: repo.writable_session(branch))

        return IcechunkStore(
            self.url,
            renew(),
            self.loop,
            timeout=self.timeout,
            renew=renew,
            rearrange=rearranger(self.repo, branch),
            repository=self,
            label=f"branch {branch}",
        )

    def snapshot_store(self, snapshot_id: str, label: str | None = None) -> IcechunkStore:
        session = self._session(lambda repo: repo.readonly_session(snapshot_id=snapshot_id))
        return IcechunkStore(self.url, session, self.loop, timeout=self.timeout, repository=self, label=label)

    def names(self, kind: str) -> list[str]:
        """The branches or tags, or the snapshots that some branch or tag reaches."""
        if kind == BRANCHES:
            return sorted(self._call(self.repo.list_branches))
        if kind == TAGS:
            return sorted(self._call(self.repo.list_tags))
        if kind == SNAPSHOTS:
            # each ref's ancestry walked down to the first snapshot another one reached
            # (its ancestors were reached with it): each snapshot read once, however
            # many refs share its history
            seen: set[str] = set()
            for ref_kind in (BRANCHES, TAGS):
                for name in self.names(ref_kind):
                    head = self.resolve(ref_kind, name)
                    self._call(lambda head=head: _reach(self.repo.ancestry(snapshot_id=head), seen))
            return sorted(seen)
        raise KeyNotFoundError(f"no kind of version {kind!r}", self.url)

    def resolve(self, kind: str, name: str) -> str:
        """The snapshot id a branch, tag or snapshot id names; KeyNotFoundError if none.
        A branch named `NAME@TIME` is that branch as it was at TIME (see as_of)."""
        try:
            if kind == BRANCHES and "@" in name and name not in self.names(BRANCHES):
                branch, _, when = name.rpartition("@")
                return self.as_of(branch, when)
            if kind == BRANCHES:
                return str(self._call(lambda: self.repo.lookup_branch(name)))
            if kind == TAGS:
                return str(self._call(lambda: self.repo.lookup_tag(name)))
            if kind == SNAPSHOTS:
                return str(self._call(lambda: self.repo.lookup_snapshot(name)).id)
        except StoreError as exc:
            raise KeyNotFoundError(f"no {kind[:-1]} {name!r}: {exc.message}", self.url) from None
        raise KeyNotFoundError(f"no kind of version {kind!r}", self.url)

    def as_of(self, branch: str, when: str) -> str:
        """The last snapshot of `branch` written in or before the span an ISO 8601 time
        names (a day, a minute, a second, or an instant; UTC unless it says otherwise), so
        that a time copied from the log names that snapshot."""
        try:
            end = _end_of_span(when)
        except ValueError:
            raise KeyNotFoundError(f"{when!r} is no ISO 8601 time", self.url) from None
        return str(self._call(lambda: self.repo.readonly_session(branch=branch, as_of=end)).snapshot_id)

    def log(self, snapshot_id: str) -> list[SnapshotEntry]:
        """The snapshot and its ancestors, newest first."""
        entries = self._call(lambda: list(self.repo.ancestry(snapshot_id=snapshot_id)))
        return [SnapshotEntry(e.id, e.written_at, e.message) for e in entries]

    def _session(self, open_session: Any) -> Any:
        """A session of the repository as authorized; of the unauthorized one (no virtual
        chunk read) where a virtual chunk of that version lies in an authorized local
        container by its name but outside it by its real path (a symlink, `..`)."""
        session = self._call(lambda: open_session(self.repo))
        if self._local_containers:
            locations = self._call(session.all_virtual_chunk_locations)
            for location in locations:
                for prefix in self._local_containers:
                    if location.startswith(prefix) and not target_url(location).startswith(container_prefix(prefix)):
                        log.warning(
                            "the virtual chunks in %s lead out of the authorized container %s (a symlink or "
                            "'..'): no virtual chunk of this version is read",
                            location,
                            prefix,
                        )
                        return self._call(lambda: open_session(self._unauthorized))
        return session

    def _call(self, action: Any) -> Any:
        try:
            return action()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(first_line(exc), self.url) from None


def _reach(ancestry: Any, seen: set[str]) -> None:
    """Add to `seen` the snapshots of an ancestry (newest first) down to the first in it."""
    for entry in ancestry:
        if entry.id in seen:
            return
        seen.add(entry.id)


def _end_of_span(when: str) -> datetime.datetime:
    """The last instant of the day, hour, minute or second an ISO 8601 time names (the
    instant itself when it has a fraction of a second); UTC unless it names a zone."""
    start = datetime.datetime.fromisoformat(when)
    if start.tzinfo is None:
        start = start.replace(tzinfo=datetime.UTC)
    clock = when[10:].lstrip("T ").split("+")[0].split("-")[0].rstrip("Z")  # zone dropped
    if "." in clock:
        return start
    span = [
        datetime.timedelta(days=1),
        datetime.timedelta(hours=1),
        datetime.timedelta(minutes=1),
        datetime.timedelta(seconds=1),
    ][clock.count(":") + 1 if clock else 0]
    return start + span - datetime.timedelta(microseconds=1)


def _local_path(url: str) -> str:
    return os.path.abspath(os.path.expanduser(url.removeprefix("file://")))


def authorized_containers(repo: Any, prefixes: VirtualChunks) -> dict[str, Mapping[str, Any]]:
    """The virtual chunk containers of the repository's config that lie under one of the
    `prefixes` (--virtual-chunks; a local path stands for its file:// URL), each with the
    storage options of the longest prefix covering it (none: the environment's). A
    container no prefix covers stays unauthorized: Icechunk reads none of its chunks."""
    wanted = sorted(((container_prefix(p), o) for p, o in prefixes.items()), key=lambda w: -len(w[0]))
    containers = repo.config.virtual_chunk_containers or {}
    return {
        prefix: next(o for w, o in wanted if prefix.startswith(w))
        for prefix in containers
        if any(prefix.startswith(w) for w, _ in wanted)
    }


def _credentials(options: Mapping[str, Any]) -> Any:
    """Icechunk's credentials for an S3 container from its storage options (anon, key and
    secret, token); None (the environment's) where they name none."""
    import icechunk

    if options.get("anon"):
        return icechunk.s3_credentials(anonymous=True)
    if options.get("key") and options.get("secret"):
        return icechunk.s3_credentials(
            access_key_id=options["key"], secret_access_key=options["secret"], session_token=options.get("token")
        )
    return None


def _containers_config(repo: Any, authorized: dict[str, Mapping[str, Any]]) -> Any:
    """The repository's config with each S3 container whose options name an endpoint or a
    region reached there instead of where the config says (a publisher's endpoint is
    seldom the reader's)."""
    import icechunk

    config = repo.config
    for prefix, options in authorized.items():
        client = options.get("client_kwargs") or {}
        endpoint = options.get("endpoint_url") or client.get("endpoint_url")
        region = options.get("region_name") or client.get("region_name")
        if prefix.split("://", 1)[0] in _S3 and (endpoint or region):
            store = icechunk.s3_store(
                region=region,
                endpoint_url=endpoint,
                allow_http=bool(endpoint and endpoint.startswith("http://")),
                force_path_style=bool(endpoint),
            )
            config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    return config


def _storage(url: str, options: dict[str, Any]) -> Any:
    """Icechunk's Storage for a local path or an s3:// URL; S3 settings come from the
    storage options (endpoint_url, key, secret, region_name, anon) or the AWS variables."""
    import icechunk

    protocol = url.split("://", 1)[0] if "://" in url else "file"
    if protocol == "file":
        return icechunk.local_filesystem_storage(_local_path(url))
    if protocol not in _S3:
        raise StoreError("Icechunk repositories are read from local paths and s3:// only", url)
    bucket, _, prefix = url.split("://", 1)[1].partition("/")
    client = options.get("client_kwargs") or {}
    endpoint = (
        options.get("endpoint_url")
        or client.get("endpoint_url")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    region = (
        options.get("region_name")
        or client.get("region_name")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )
    settings: dict[str, Any] = {"bucket": bucket, "prefix": prefix.strip("/") or None, "region": region}
    if endpoint:
        settings.update(endpoint_url=endpoint, allow_http=endpoint.startswith("http://"), force_path_style=True)
    if options.get("anon"):
        settings["anonymous"] = True
    elif options.get("key") and options.get("secret"):
        settings.update(
            access_key_id=options["key"], secret_access_key=options["secret"], session_token=options.get("token")
        )
    else:
        settings["from_env"] = True
    return icechunk.s3_storage(**settings)
