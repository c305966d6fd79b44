"""The terminal failure logged with one caller field ``name=value``, by each route a
caller's field reaches obs: a call's keyword, ``bind``, a contextvar, a typed event's
keyword, a stdlib record's ``extra=``. Shared by the Loki name and level tests."""

from __future__ import annotations

import dataclasses
import logging

import structlog

import obs
import obs.events
from obs.events import emit

ALERT = "workspace_terminal_failure"
ROUTES = ("call", "bind", "contextvars", "event", "stdlib")


@dataclasses.dataclass(frozen=True)
class _Failure(obs.events.Event):
    name = "test_level_terminal_failure"
    level = logging.ERROR
    chain: str


def log_alert_with(route: str, name: str, value: str) -> None:
    """Log the terminal failure with the caller's field ``name=value`` by ``route``."""
    log = obs.get_logger("comm.flashinfer_allreduce")
    if route == "call":
        log.error(ALERT, stage="terminal_failure", chain="fi_ar", **{name: value})
    elif route == "bind":
        log.bind(**{name: value}).error(ALERT, stage="terminal_failure", chain="fi_ar")
    elif route == "contextvars":
        structlog.contextvars.bind_contextvars(**{name: value})
        try:
            log.error(ALERT, stage="terminal_failure", chain="fi_ar")
        finally:
            structlog.contextvars.clear_contextvars()
    elif route == "event":
        emit(_Failure(chain="fi_ar"), **{name: value})
    else:
        extra = {name: value, "stage": "terminal_failure", "chain": "fi_ar"}
        logging.getLogger("lib").error(ALERT, extra=extra)
