"""The Redactor: the chain's processor that makes every field safe before any sink sees it.

Secret-named fields redacted, names bounded and scrubbed, values walked into bounded,
redacted, JSON-safe copies (:mod:`obs.encode`), ``exc_info`` turned into ``exception.*``.
"""

from __future__ import annotations

__all__ = ["Redactor"]

from collections.abc import Iterable
from typing import TYPE_CHECKING

from obs._fields import CONTROL_SET, user_name
from obs._labels import loki_safe
from obs._secrets import REDACTED, close_budget, open_budget, scrub_name, scrub_text
from obs.encode import (
    FLAT,
    MAX_KEY,
    MAX_STR,
    SCALAR_TYPES,
    any_credential,
    body_text,
    format_exception,
    is_secret_key,
    safe_str,
    to_jsonable,
)

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger


def _free_name(event_dict: EventDict, key: object) -> str:
    """The plain, bounded name a key that is not a plain short str is written under: its
    text (a str subclass's exact value), as ``user.<text>`` when that is a control or
    private name or a key already there, so it never overwrites a field."""
    text = str.__str__(key) if isinstance(key, str) else key  # a text: scrubbed, then cut
    name = user_name(safe_str(text, MAX_KEY, scrub_text))
    if not loki_safe(name):  # no label name (the whole push refused), or a control's
        name = f"user.{name}"
    while name in event_dict:
        name = f"user.{name}"
    return name


class Redactor:
    """Processor: redact secret-looking fields, make values safe, turn ``exc_info`` into
    ``exception.*``, make a ``body`` that is not a str text (:func:`body_text`).

    Key decisions are cached per key name, so the common case is one C-level subset test.
    An event whose entry marked it ``_obs_flat`` with :data:`FLAT` (only str/int/float/bool/
    None values) skips the walk; any other value is replaced by its bounded, redacted,
    JSON-safe copy, so the export and the renderer downstream see the same safe data.
    """

    __slots__ = ("_extra", "_safe")

    def __init__(self, extra_parts: Iterable[str] = ()) -> None:
        self._extra = tuple(p.lower() for p in extra_parts)
        #: Key names known not to be secret: the common case is one C-level set difference.
        self._safe: set[str] = set()

    def is_secret(self, key: str) -> bool:
        """True when a field named ``key`` must not be shown."""
        if is_secret_key(key):
            return True
        if self._extra and isinstance(key, str):
            low = key.lower()
            return any(p in low for p in self._extra)
        return False

    def __call__(  # the redaction hot path: fast checks first, inlined
        self, logger: WrappedLogger, method_name: str, event_dict: EventDict
    ) -> EventDict:
        exc = event_dict.pop("exc_info", None)
        made: Iterable[str] = ()
        if exc is not None and exc is not False:
            fields = format_exception(exc)
            if fields:
                event_dict.update(fields)
                made = fields.keys()  # scrubbed and cut there: not walked or scanned again
        budget = open_budget()  # what scrubbing this call's names and values may cost
        try:
            if not self._safe.issuperset(event_dict):  # the fast path: every key seen, none secret
                self._names(event_dict)
            return self._values(event_dict, set(made) if made else None)
        finally:
            close_budget(budget)

    def _names(self, event_dict: EventDict) -> None:
        """Names not seen before: bounded, scrubbed (a name may hold a pair: ``**{"token=x":
        1}``), their values redacted when the name is secret; clean ones remembered."""
        renamed = 0
        for key in event_dict.keys() - self._safe:
            name = key
            if type(key) is not str or len(key) > MAX_KEY or not loki_safe(key):
                value = event_dict.pop(key)  # not taken by itself (a str subclass)
                name = _free_name(event_dict, key)
                event_dict[name] = value
            shown = name if name[:5] == "_obs_" else scrub_text(name)
            if shown != name:  # written under its scrubbed name, numbered when that is taken
                value = event_dict.pop(name)
                name = user_name(shown)
                while name in event_dict:
                    renamed += 1
                    name = f"{shown}.{renamed}"
                event_dict[name] = value
            if self.is_secret(key if type(key) is str else name):  # a long name's end too
                event_dict[name] = REDACTED
            elif shown == name and len(self._safe) < 4096:
                self._safe.add(name)

    @staticmethod
    def _values(event_dict: EventDict, walked: set[str] | None = None) -> EventDict:
        """Each value made safe and scrubbed (within the call's budget). A text the walk
        returned (a long str cut, a str subclass) was scrubbed by it, and ``walked`` (the
        ``exception.*`` fields) were made safe where they were made: neither is again."""
        if event_dict.get("_obs_flat") is not FLAT:
            for key, value in event_dict.items():
                cls = type(value)
                if (
                    (
                        cls not in SCALAR_TYPES
                        or (cls is str and len(value) > MAX_STR)
                        or (cls is float and value - value != 0.0)
                    )
                    and key[:5] != "_obs_"
                    and (walked is None or key not in walked)
                ):
                    event_dict[key] = made = to_jsonable(value)
                    if type(made) is str:  # scrub_text's, cut after
                        walked = {key} if walked is None else walked | {key}
        body = event_dict.get("body", "")
        if type(body) is not str:  # before the export and the renderer: one text for both
            event_dict["body"] = body_text(body, event_dict.get("event"))
        values = event_dict.values()
        if walked is not None:  # a 1 MB value's 17 KB cut: scanned once, not twice
            values = [v for k, v in event_dict.items() if k not in walked]  # type: ignore[assignment]
        if any_credential(values):
            _scrub_texts(event_dict, walked)
        return event_dict


def _scrub_texts(event_dict: EventDict, walked: set[str] | None) -> None:
    """Each str of ``event_dict`` (event, body and values alike) but ``walked`` scrubbed. A
    caller's text is scrubbed as obs' own is (secret pairs too); names (event, logger,
    ``code.*``) and a body that is the event keep a pair whose value is a placeholder
    (``"password=%s"`` is a template), and a body that is the event's str is scanned once."""
    event = event_dict.get("event")
    named_last: tuple[object, str] = (None, "")
    for key, value in event_dict.items():
        if type(value) is str and key[:5] != "_obs_" and (walked is None or key not in walked):
            if key not in CONTROL_SET or (key == "body" and value != event):
                event_dict[key] = scrub_text(value)
            elif value is named_last[0]:  # the same str: its scrub is the same
                event_dict[key] = named_last[1]
            else:
                named_last = (value, scrub_name(value))
                event_dict[key] = named_last[1]
