"""Context-local fields: structlog's ``bind_contextvars`` context merged into each event.

The same contract as :func:`structlog.contextvars.merge_contextvars` (fields bound with
``structlog.contextvars.bind_contextvars`` are added unless the call passed the same key),
plus two things: a context field named like a control field (``outcome``, ``event``,
``rank``, ...), a call keyword (``once_key``, ``every_n``, ``scope``, ...) or one of obs'
private ``_obs_*`` keys is kept as ``user.<name>`` and never overwrites it nor is acted
on, and a merged value that
is not a plain scalar clears the ``_obs_flat`` mark, so nested secrets are still redacted.
"""

from __future__ import annotations

__all__ = ["STRUCTLOG_KEY_PREFIX", "any_bound", "merge_contextvars"]

import contextvars
from typing import TYPE_CHECKING

from obs._fields import CONTEXT_OWNED, user_name
from obs.encode import plain_values

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

#: The prefix of structlog's context variables (``structlog.contextvars``; a test checks
#: it is structlog's): spelled here so ``import obs`` does not import structlog.
STRUCTLOG_KEY_PREFIX = "structlog_"
_PREFIX_LEN = len(STRUCTLOG_KEY_PREFIX)


def merge_contextvars(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """Processor: add the bound context-local fields (a call's own keys win)."""
    for var, value in contextvars.copy_context().items():
        if value is not Ellipsis and var.name.startswith(STRUCTLOG_KEY_PREFIX):
            key = user_name(var.name[_PREFIX_LEN:], owned=CONTEXT_OWNED)
            if key not in event_dict:
                event_dict[key] = value
                if not plain_values({key: value}):
                    event_dict["_obs_flat"] = False
    return event_dict


def any_bound() -> bool:
    """Whether any structlog context variable is bound in this context (the fused default
    chain is only taken when none is: :func:`merge_contextvars` would add nothing)."""
    for var, value in contextvars.copy_context().items():
        if value is not Ellipsis and var.name.startswith(STRUCTLOG_KEY_PREFIX):
            return True
    return False
