"""Exceptions and control-flow signals of obs."""

from __future__ import annotations

__all__ = ["ConfigError", "DropEvent"]

from structlog import DropEvent


class ConfigError(ValueError):
    """A setting has a value obs cannot use; raised by ``obs.configure()``, never later.

    The message names the variable (``OBS_LEVEL``) or keyword (``level``) and the values
    it accepts, so the fix is obvious from the traceback alone.
    """

    def __init__(self, variable: str, value: object, accepted: str) -> None:
        self.variable = variable
        self.value = value
        self.accepted = accepted
        super().__init__(f"{variable}={value!r} is not valid: expected {accepted}")
