"""Safe values: rendering anything without raising, redaction, exception fields.

Log fields come from application code and may be anything: tensors (whose ``repr`` can
sync a GPU or print megabytes), objects with a broken ``__repr__``, recursive containers,
huge strings, non-str keys. Everything here turns such values into JSON/OTLP-safe data and
never raises.
"""

from __future__ import annotations

__all__ = [
    "REDACTED",
    "SECRET_KEY_PARTS",
    "SECRET_LAST_WORDS",
    "Redactor",
    "format_exception",
    "safe_repr",
    "to_jsonable",
    "to_otel_value",
]

import re
import sys
import traceback
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from structlog.typing import EventDict, WrappedLogger

REDACTED = "[REDACTED]"
#: A field whose lower-cased name contains one of these has its value redacted.
SECRET_KEY_PARTS: tuple[str, ...] = (
    "authorization",
    "password",
    "passwd",
    "secret",
    "api_key",
    "apikey",
    "api-key",
    "cookie",
    "credential",
    "private_key",
)
#: ... and so does one whose last word is one of these (``hf_token``, ``otlp_headers``),
#: so ``max_token_num`` or ``num_tokens`` stay readable.
SECRET_LAST_WORDS: frozenset[str] = frozenset({"token", "headers", "auth", "bearer"})
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")

MAX_STR = 16 * 1024
MAX_DEPTH = 8
MAX_ITEMS = 256
_INT64 = (-(2**63), 2**63 - 1)
_SCALARS = (str, bool, int, float, type(None))


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[truncated {len(text) - limit} chars]"


def _torch_summary(obj: object) -> str | None:
    """A data-free summary of torch objects (a tensor's repr can sync the GPU)."""
    cls = type(obj)
    if not cls.__module__.startswith("torch"):
        return None
    try:
        if hasattr(obj, "shape") and hasattr(obj, "dtype") and hasattr(obj, "device"):
            shape = list(obj.shape)
            return f"{cls.__name__}(shape={shape}, dtype={obj.dtype}, device={obj.device})"
        if cls.__name__.startswith("ProcessGroup") or "ProcessGroup" in cls.__name__:
            size = obj.size() if hasattr(obj, "size") else "?"
            rank = obj.rank() if hasattr(obj, "rank") else "?"
            return f"<{cls.__name__} rank={rank} size={size}>"
        return str(obj)  # dtype, device, Size: short and data-free
    except Exception:
        return None


def safe_repr(obj: object, limit: int = MAX_STR) -> str:
    """``repr(obj)`` that never raises, is data-free for tensors and bounded in length."""
    try:
        summary = _torch_summary(obj)
        text = summary if summary is not None else repr(obj)
        if not isinstance(text, str):  # a __repr__ returning a non-str
            text = f"<{type(obj).__qualname__} object>"
    except Exception as exc:  # a broken __repr__
        text = f"<unrepresentable {type(obj).__qualname__} object: {type(exc).__name__}>"
    return _truncate(text, limit)


def _safe_str(obj: object, limit: int = MAX_STR) -> str:
    if isinstance(obj, str):
        return _truncate(obj, limit)
    if isinstance(obj, BaseException):
        try:
            return _truncate(f"{type(obj).__name__}: {obj}", limit)
        except Exception:
            return safe_repr(obj, limit)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return _truncate(bytes(obj).decode("utf-8", "backslashreplace"), limit)
    return safe_repr(obj, limit)


def _key(obj: object) -> str:
    return obj if isinstance(obj, str) else _safe_str(obj, 256)


def _walk(obj: object, depth: int, seen: set[int], otel: bool) -> Any:
    if isinstance(obj, _SCALARS):
        if isinstance(obj, str):
            return _truncate(obj, MAX_STR)
        if isinstance(obj, int) and not isinstance(obj, bool) and not _INT64[0] <= obj <= _INT64[1]:
            return str(obj)
        if (isinstance(obj, float) and obj != obj) or obj in (float("inf"), float("-inf")):  # noqa: PLR0124
            return str(obj)  # JSON has no NaN/inf; keep the information as text
        if obj is None and otel:
            return None
        return obj
    if depth >= MAX_DEPTH:
        return safe_repr(obj, 256)
    if isinstance(obj, Mapping):
        if id(obj) in seen:
            return "<recursion>"
        seen.add(id(obj))
        try:
            out = {}
            for i, (k, v) in enumerate(obj.items()):
                if i >= MAX_ITEMS:
                    out["..."] = f"{len(obj) - MAX_ITEMS} more items"
                    break
                out[_key(k)] = _walk(v, depth + 1, seen, otel)
            return out
        except Exception:
            return safe_repr(obj)
        finally:
            seen.discard(id(obj))
    if isinstance(obj, (list, tuple, set, frozenset)):
        if id(obj) in seen:
            return "<recursion>"
        seen.add(id(obj))
        try:
            items: Iterable[object] = obj
            if isinstance(obj, (set, frozenset)):
                items = sorted(obj, key=safe_repr)
            out_list = []
            for i, v in enumerate(items):
                if i >= MAX_ITEMS:
                    out_list.append(f"... {len(obj) - MAX_ITEMS} more items")
                    break
                out_list.append(_walk(v, depth + 1, seen, otel))
            return out_list
        except Exception:
            return safe_repr(obj)
        finally:
            seen.discard(id(obj))
    return _safe_str(obj)


def to_jsonable(obj: object) -> Any:
    """A JSON-serialisable copy of ``obj``: str keys, bounded depth/size, no cycles."""
    try:
        return _walk(obj, 0, set(), otel=False)
    except Exception:
        return safe_repr(obj)


def to_otel_value(obj: object) -> Any:
    """An OTel ``AnyValue``-safe copy: scalars, lists, str-keyed dicts; objects become str.

    Unlike the SDK's own coercion this never logs a warning per call and never returns
    something the protobuf encoder could choke on at export time.
    """
    cls = type(obj)
    if cls is str or cls is bool or (cls is int and _INT64[0] <= obj <= _INT64[1]):  # type: ignore[operator]
        return obj
    if cls is float:
        # NaN/inf become "nan"/"inf", as in the JSON line, so both routes carry one value.
        return obj if obj - obj == 0.0 else str(obj)  # type: ignore[operator]
    try:
        return _walk(obj, 0, set(), otel=True)
    except Exception:
        return safe_repr(obj)


def json_default(obj: object) -> Any:
    """``orjson`` ``default=`` hook: called only for types orjson cannot encode itself."""
    if isinstance(obj, (set, frozenset, Mapping)):
        return to_jsonable(obj)
    return _safe_str(obj)


ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _exc_tuple(value: object) -> ExcInfo | None:
    if value is True:
        info = sys.exc_info()
        return info if info[1] is not None else None
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return value
    return None


def format_exception(value: object) -> dict[str, str] | None:
    """``exc_info`` (True, an exception or a 3-tuple) as OTel ``exception.*`` fields."""
    try:
        info = _exc_tuple(value)
        if info is None:
            return None
        etype, exc, tb = info
        return {
            "exception.type": f"{etype.__module__}.{etype.__qualname__}"
            if etype.__module__ not in ("builtins", "__main__")
            else etype.__qualname__,
            "exception.message": _safe_str(exc.args[0] if len(exc.args) == 1 else exc).removeprefix(
                f"{etype.__name__}: "
            ),
            "exception.stacktrace": _truncate(
                "".join(traceback.format_exception(etype, exc, tb)), 64 * 1024
            ),
        }
    except Exception as err:
        return {
            "exception.type": "unknown",
            "exception.message": safe_repr(err),
            "exception.stacktrace": "",
        }


class Redactor:
    """Processor: redact secret-looking fields and turn ``exc_info`` into ``exception.*``.

    Key decisions are cached per key name, so the common case is one C-level subset test;
    nested mappings one level down are checked too (``extra={"headers": {...}}``), unless
    the entry marked the event ``_obs_flat`` (it saw no ``dict`` among the caller's values).
    """

    __slots__ = ("_cache", "_parts", "_safe")

    def __init__(self, extra_parts: Iterable[str] = ()) -> None:
        self._parts = tuple(SECRET_KEY_PARTS) + tuple(p.lower() for p in extra_parts)
        self._cache: dict[str, bool] = {}
        #: Key names known not to be secret: the common case is one C-level set difference.
        self._safe: set[str] = set()

    def is_secret(self, key: str) -> bool:
        """True when a field named ``key`` must not be shown."""
        hit = self._cache.get(key)
        if hit is None:
            low = key.lower() if isinstance(key, str) else ""
            words = _WORD_SPLIT.split(low)
            hit = any(p in low for p in self._parts) or words[-1] in SECRET_LAST_WORDS
            if len(self._cache) < 4096:
                self._cache[key] = hit
                if not hit:
                    self._safe.add(key)
        return hit

    def _redact_nested(self, value: dict[Any, Any]) -> dict[Any, Any]:
        secret = self.is_secret
        if not any(isinstance(k, str) and secret(k) for k in value):
            return value
        return {k: (REDACTED if isinstance(k, str) and secret(k) else v) for k, v in value.items()}

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        exc = event_dict.pop("exc_info", None)
        if exc is not None and exc is not False:
            fields = format_exception(exc)
            if fields:
                event_dict.update(fields)
        if not self._safe.issuperset(event_dict):  # the fast path: every key seen, none secret
            for key in event_dict.keys() - self._safe:
                if self.is_secret(key):
                    event_dict[key] = REDACTED
        if not event_dict.get("_obs_flat") and dict in map(type, event_dict.values()):
            for key, value in event_dict.items():
                if type(value) is dict:
                    event_dict[key] = self._redact_nested(value)
        return event_dict
