"""The store layer's exception hierarchy and the mapping from fsspec, OS, botocore,
aiohttp and obstore failures onto it. Those libraries are optional, so their failures are
recognised by class name, attributes and (obstore's) message rather than imported."""

from __future__ import annotations

import errno
import re

_NOT_FOUND_ERRNOS = {errno.ENOENT, errno.ENOTDIR}
_PERMISSION_ERRNOS = {errno.EACCES, errno.EPERM}
_UNAVAILABLE_ERRNOS = {
    errno.ETIMEDOUT,
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ENETDOWN,
    errno.EHOSTDOWN,
    errno.EPIPE,
    errno.ENOTCONN,
    errno.EAGAIN,
    errno.EREMOTEIO,
}
# Transport failures of botocore, aiohttp and fsspec, matched anywhere in the class's MRO.
_UNAVAILABLE_CLASSES = {
    "ConnectionError",
    "HTTPClientError",
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ConnectionClosedError",
    "ProxyConnectionError",
    "ResponseStreamingError",
    "ClientConnectionError",
    "ServerDisconnectedError",
    "ServerTimeoutError",
    "ClientPayloadError",
    "FSTimeoutError",
    "TimeoutError",
}
_CREDENTIAL_CLASSES = {
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "PermissionDeniedError",
    "UnauthenticatedError",  # obstore
}
_NOT_FOUND_CODES = {"NoSuchKey", "NotFound", "NoSuchVersion", "404"}
_PERMISSION_CODES = {
    "AccessDenied",
    "AllAccessDisabled",
    "AccountProblem",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "403",
    "401",
}
# a value over what the store takes (S3: 5 GiB in one PUT, 5 TiB in all)
_TOO_LARGE_CODES = {"EntityTooLarge", "413"}
_UNAVAILABLE_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
    "RequestTimeTooSkewed",
    "TooManyRequests",
    "429",
}
# obstore (Rust's object_store) gives the HTTP status and the S3 error document only in
# its message; a failure to send a request or read a response (connect, reset, timeout,
# a body cut short) is a GenericError that says "HTTP error".
_OBSTORE_STATUS = re.compile(r"non-2xx status code: (\d{3})")
_OBSTORE_BODY = re.compile(r"(: )?(<\?xml[^>]*>\s*)?<Error>.*", re.DOTALL)
_S3_ERROR_CODE = re.compile(r"<Code>([^<]{1,64})</Code>")
_OBSTORE_TRANSPORT = "HTTP error"
_OBSTORE_DEBUG = "\n\nDebug source"


class StoreError(Exception):
    """A store operation failed; `key` is the key or prefix involved (None for the store)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message if key is None else f"{key!r}: {message}")
        self.message = message
        self.key = key


class KeyNotFoundError(StoreError):
    """The key (or prefix) holds no value."""


class KeyExistsError(StoreError):
    """The destination of a move already holds a value or a prefix."""


class StorePermissionError(StoreError):
    """The store refused access (credentials, ACLs, file modes)."""


class StoreUnavailableError(StoreError):
    """The store could not be reached, timed out or failed on its side, even after retries."""


class StoreVanishedError(StoreError):
    """The store itself is gone, or another stands in its place (its root directory
    removed or replaced, its bucket deleted): no key is missing from it, none can be made."""


class InvalidKeyError(StoreError):
    """The key or prefix breaks the key rules (see keys.py)."""


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a read-only store."""


class ConfinementError(StoreError):
    """The key leads through a symbolic link, or names a FIFO, socket or device: the local
    store never follows, opens, writes or removes those (docs/errors.md, Confinement)."""


class ValueTooLargeError(StoreError):
    """The value is larger than the caller's limit, so it was not read; or larger than
    the store takes, so it was not stored."""


def translate_error(exc: BaseException, key: str | None = None) -> StoreError:
    """Return the StoreError that describes `exc` (raise it `from exc`)."""
    if isinstance(exc, StoreError):
        return exc
    chain = _chain(exc)
    # A service response (S3 error code, HTTP status) is more precise than the OSError
    # s3fs wraps it in: s3fs turns NoSuchKey and NoSuchBucket alike into FileNotFoundError.
    for error in chain:
        found = _from_response(error, key)
        if found is not None:
            return found
    for error in chain:
        found = _from_exception(error, key)
        if found is not None:
            return found
    return StoreError(_describe(exc), key)


def is_unsatisfiable_range(exc: BaseException) -> bool:
    """Whether `exc` is an HTTP 416 (a range starting past the end of the value)."""
    for error in _chain(exc):
        code, status = _response_code(error)
        if code == "InvalidRange" or status == 416:
            return True
    return False


def is_precondition_failure(exc: BaseException) -> bool:
    """Whether `exc` is a conditional write refused because the value is not the version
    it named (HTTP 412; S3's 409 ConditionalRequestConflict, two such writes at once;
    obstore's AlreadyExistsError or PreconditionError)."""
    for error in _chain(exc):
        if _class_names(error) & {"AlreadyExistsError", "PreconditionError"}:
            return True
        code, status = _response_code(error)
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status == 412:
            return True
    return False


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    error: BaseException | None = exc
    while error is not None and error not in chain and len(chain) < 8:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return chain


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _response_code(exc: BaseException) -> tuple[str | None, int | None]:
    """(error code, HTTP status) of a botocore ClientError or aiohttp ClientResponseError."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return (str(code) if code is not None else None), status
    if "ClientResponseError" in _class_names(exc):
        status = getattr(exc, "status", None)
        return None, status if isinstance(status, int) else None
    text = str(exc)
    found = _OBSTORE_STATUS.search(text)
    if found:
        code = _S3_ERROR_CODE.search(text.split(_OBSTORE_DEBUG, 1)[0])
        return (code.group(1) if code else None), int(found.group(1))
    return None, None


def _from_response(exc: BaseException, key: str | None) -> StoreError | None:
    code, status = _response_code(exc)
    if code is None and status is None:
        return None
    message = _describe(exc)
    if code == "NoSuchBucket":
        return StoreVanishedError(f"the bucket does not exist ({message})", key)
    if code in _NOT_FOUND_CODES or (code is None and status == 404):
        return KeyNotFoundError(message, key)
    if code in _PERMISSION_CODES or (code is None and status in (401, 403)):
        return StorePermissionError(message, key)
    if code in _TOO_LARGE_CODES or status == 413:
        return ValueTooLargeError(f"more than the store takes ({message})", key)
    if code in _UNAVAILABLE_CODES or (status is not None and (status >= 500 or status == 429)):
        return StoreUnavailableError(message, key)  # 429: too many requests (GCS, Azure, HTTP), retried
    return None


def _from_exception(exc: BaseException, key: str | None) -> StoreError | None:
    message = _describe(exc)
    number = getattr(exc, "errno", None)
    if isinstance(exc, FileNotFoundError) or number in _NOT_FOUND_ERRNOS:
        return KeyNotFoundError(message, key)
    if isinstance(exc, PermissionError) or number in _PERMISSION_ERRNOS:
        return StorePermissionError(message, key)
    if number == errno.EROFS:
        return ReadOnlyStoreError(message, key)
    if number == errno.EFBIG:
        return ValueTooLargeError(f"more than the store takes ({message})", key)
    names = _class_names(exc)
    if number in _UNAVAILABLE_ERRNOS or names & _UNAVAILABLE_CLASSES:
        return StoreUnavailableError(message, key)
    if "GenericError" in names and _OBSTORE_TRANSPORT in str(exc):
        return StoreUnavailableError(message, key)
    if names & _CREDENTIAL_CLASSES:
        return StorePermissionError(message, key)
    return None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if _OBSTORE_DEBUG in text:  # one line: the request and the status, the S3 code for the body
        text = text.split(_OBSTORE_DEBUG, 1)[0]
        code = _S3_ERROR_CODE.search(text)
        text = _OBSTORE_BODY.sub(f" ({code.group(1)})" if code else "", text).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
