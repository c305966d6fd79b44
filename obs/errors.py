"""Exceptions and control-flow signals of obs."""

from __future__ import annotations

__all__ = ["ConfigError", "DropEvent"]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog import DropEvent


def __getattr__(name: str) -> Any:
    """``DropEvent`` is structlog's own class (users' chains catch it), imported on first
    use: ``import obs`` does not import structlog (half its import time is asyncio/ssl)."""
    if name == "DropEvent":
        from structlog import DropEvent  # noqa: PLC0415 - lazily, see above

        globals()["DropEvent"] = DropEvent  # later lookups are plain attribute reads
        return DropEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ConfigError(ValueError):
    """A setting has a value obs cannot use; raised by ``obs.configure()``, never later.

    The message names the variable (``OBS_LEVEL``) or keyword (``level``) and the values
    it accepts, so the fix is obvious from the traceback alone.
    """

    def __init__(self, variable: str, value: object, accepted: str) -> None:
        self.variable = variable
        self.accepted = accepted
        #: The value: redacted for headers and secret-named variables, URL passwords too.
        self.value = _shown(variable, value)
        from obs.encode import safe_repr  # noqa: PLC0415 - encode imports structlog

        super().__init__(
            f"{variable}={safe_repr(self.value, 300)} is not valid: expected {accepted}"
        )


def _shown(variable: str, value: object) -> object:
    from obs.encode import REDACTED, is_secret_key, scrub_text  # noqa: PLC0415

    if is_secret_key(variable):
        return REDACTED
    if isinstance(value, str) and "@" in value and "endpoint" in variable.lower():
        # A URL that was refused may be malformed anywhere: all before its last "@" goes.
        scheme, sep, _ = value.partition("://")
        head = f"{scheme}{sep}" if sep and "@" not in scheme else ""
        return f"{head}{REDACTED}@{value.rsplit('@', 1)[1]}"
    return scrub_text(value) if isinstance(value, str) else value
