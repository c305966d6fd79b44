"""Exceptions and control-flow signals of obs."""

from __future__ import annotations

__all__ = ["ConfigError", "DropEvent"]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog import DropEvent


def __getattr__(name: str) -> Any:
    """``DropEvent`` is structlog's own class (users' chains catch it), imported on first
    use: ``import obs`` does not import structlog (half its import time is asyncio/ssl).

    A first use while the interpreter shuts down cannot import anything (a finaliser
    logging a suppressed repeat); then structlog was never loaded, so no chain of the user
    can catch the drop, and obs' own class stands in (obs raises and catches this one).
    """
    if name == "DropEvent":
        drop: type[BaseException]
        try:
            from structlog import DropEvent as drop  # noqa: PLC0415, N813 - lazily, see above
        except Exception:  # ImportError: sys.meta_path is None (interpreter shutdown)
            drop = _ShutdownDropEvent
        globals()["DropEvent"] = drop  # later lookups are plain attribute reads
        return drop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _ShutdownDropEvent(BaseException):
    """Drop this event (structlog's ``DropEvent`` when structlog cannot be imported)."""


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
