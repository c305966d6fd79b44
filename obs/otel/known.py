"""The credentials an exporter sends (header values, the endpoint's user info and query
values), taken out of obs' own text about the collector and out of the SDK exporters'
warnings: a collector or proxy echoing one under no secret-looking name (``invalid api
key <value>``, a partial_success quoting the request) is beyond any pattern's reach.
"""

from __future__ import annotations

__all__ = [
    "SDK_LOGS",
    "KnownSecrets",
    "exporter_secrets",
    "install_sdk_filter",
    "settings_secrets",
    "url_secrets",
]

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from obs.encode import REDACTED

#: Shorter values are left alone: they would cut ordinary words out of every message.
MIN_LENGTH = 4
#: The SDK exporters' loggers: their warnings quote the collector's words and the client's
#: errors (the request URL, query and all).
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.common.http",
)
#: The HTTP exporter's own headers: no credential.
_SDK_HEADERS = frozenset({"content-type", "user-agent", "content-encoding"})


class KnownSecrets(logging.Filter):
    """Values taken out of text: ``known(text)``; as a logging filter, of a record's message."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        super().__init__()
        self._values: tuple[str, ...] = ()
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        """Also take out ``values`` (as sent, percent-decoded and percent-encoded)."""
        forms = set(self._values)
        for value in values:
            text = str(value).strip()
            for form in (text, unquote(text), quote(text, safe="")):
                if len(form) >= MIN_LENGTH:
                    forms.add(form)
        self._values = tuple(sorted(forms, key=len, reverse=True))  # the longest first

    def __bool__(self) -> bool:
        return bool(self._values)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._values:
            try:
                message = record.getMessage()
            except Exception:  # a record whose args do not format: left to logging
                return True
            redacted = self(message)
            if redacted != message:
                record.msg, record.args = redacted, None
        return True


#: The filter on the SDK exporters' loggers (each transport adds its exporter's values).
SDK_LOGS = KnownSecrets()


def install_sdk_filter(values: Iterable[str]) -> None:
    """Take ``values`` out of the SDK exporters' warnings from now on."""
    SDK_LOGS.add(values)
    for name in _SDK_LOGGERS:
        logging.getLogger(name).addFilter(SDK_LOGS)  # once: addFilter keeps one of each


def _words(value: str) -> list[str]:
    """A header value and, for ``<scheme> <credentials>``, the credentials alone."""
    parts = value.split()
    return [value, parts[-1]] if len(parts) > 1 else [value]


def url_secrets(url: str | None) -> list[str]:
    """The user, password and every query value of ``url``."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
        found += [piece.partition("=")[2] for piece in parts.query.split("&")]  # as written
    except ValueError:
        return []
    return [value for value in found if value]


def exporter_secrets(exporter: Any) -> list[str]:
    """The header values and endpoint credentials an SDK OTLP exporter sends (1.45's
    private names: HTTP ``_client._headers`` / ``_client._endpoint``, gRPC ``_headers``
    / ``_endpoint``); none where they differ."""
    found: list[str] = []
    client = getattr(exporter, "_client", None)
    headers: Any = getattr(client, "_headers", None)
    pairs = list(headers.items()) if isinstance(headers, dict) else []
    grpc_headers = getattr(exporter, "_headers", None)
    if isinstance(grpc_headers, tuple):
        pairs += [pair for pair in grpc_headers if isinstance(pair, tuple) and len(pair) == 2]
    for name, value in pairs:
        if isinstance(value, str) and str(name).lower() not in _SDK_HEADERS:
            found += _words(value)
    for endpoint in (getattr(client, "_endpoint", None), getattr(exporter, "_endpoint", None)):
        if isinstance(endpoint, str):
            found += url_secrets(endpoint)
    return found


def settings_secrets(headers: dict[str, str], url: str | None) -> list[str]:
    """The header values and endpoint credentials settings configure."""
    found = [word for value in headers.values() for word in _words(value)]
    return found + url_secrets(url)
