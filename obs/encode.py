"""Safe values: rendering anything without raising, redaction, exception fields.

Log fields come from application code and may be anything: tensors (whose ``repr`` can
sync a GPU or print megabytes), objects with a broken ``__repr__``, recursive containers,
huge strings, ints or keys, lone surrogates, non-str keys. Everything here turns such
values into JSON/OTLP-safe data, bounded in time and size, and never raises.

Secrets: :mod:`obs._secrets` decides which field names are secret; every container kind
(any ``Mapping``, sequences, sets, dataclasses, attrs classes, named tuples) is walked
with that rule, so a secret two levels down in a list of dicts is redacted too, and every
str written is scrubbed of URL passwords and bearer tokens.
"""

from __future__ import annotations

__all__ = [
    "FLAT",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_KEY",
    "MAX_STR",
    "MAX_WALK",
    "PLAIN_TYPES",
    "REDACTED",
    "SCALAR_TYPES",
    "SECRET_PAIRS",
    "SECRET_WORDS",
    "any_credential",
    "body_text",
    "credential_hint",
    "error_text",
    "format_exception",
    "is_secret_key",
    "key_words",
    "plain_values",
    "safe_repr",
    "safe_str",
    "scrub_credentials",
    "scrub_text",
    "scrubbed_text",
    "to_jsonable",
    "to_otel_value",
]

import contextlib
import dataclasses
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping, MappingView
from operator import length_hint
from typing import Any

from obs._exc_tree import (
    MAX_FRAMES,
    Tree,
    chain_rest,
    exc_tuple,
    frame_lines,
    is_group,
    members,
    notes,
)
from obs._fold import read_secret_hint
from obs._repr import BOUNDED as _REPR
from obs._secrets import (
    MAX_KEY,
    REDACTED,
    SCRUB_CHARS,
    SECRET_PAIRS,
    SECRET_WORDS,
    close_budget,
    credential_hint,
    cut_head,
    is_secret_name,
    key_words,
    open_budget,
    pair_hint,
    scrub_credentials,
    scrub_text,
)

MAX_STR = 16 * 1024
MAX_DEPTH = 8
MAX_ITEMS = 256
#: Values visited in one walk, whatever the shape (wide and deep together); a long str or
#: key counts a value more per 128 characters (thousands of long keys cost 0.5 s a call).
MAX_WALK = 2048
#: Exceptions of a ``__cause__``/``__context__`` chain that are formatted.
MAX_CHAIN = 8
#: What ``exception.stacktrace`` shows: as much as any text field (the Redactor cut a longer
#: trace to it, after it was made and scrubbed twice).
MAX_STACK = MAX_STR
_INT64 = (-(2**63), 2**63 - 1)
SCALAR_TYPES = (str, bool, int, float, type(None))


def is_secret_key(key: object) -> bool:
    """True when a field named ``key`` must not show its value (:mod:`obs._secrets`);
    a key that is not a str is judged by its bounded repr."""
    if type(key) is not str:
        try:
            key = str.__str__(key) if isinstance(key, str) else safe_repr(key, MAX_KEY)
        except BaseException:
            return False
    return is_secret_name(key)


PLAIN_TYPES = frozenset(SCALAR_TYPES)
_IS_STR = str.__instancecheck__


def any_credential(values: Iterable[Any]) -> bool:
    """Whether any str among ``values`` may hold a credential or a secret pair: one join and
    test for an event of short texts; past 4 KiB, True (each text is tested by itself as it
    is scrubbed: testing them all first too cost the hints twice). Text a reader reads
    otherwise than it is spelled (:func:`~obs._fold.read_secret_hint`) may hold one too."""
    joined = "\0".join(filter(_IS_STR, values))
    return (
        len(joined) > 4096
        or credential_hint(joined)
        or pair_hint(joined)
        or read_secret_hint(joined)
    )


class _FlatMark:
    """The type of :data:`FLAT`: one instance, never equal to anything a caller can pass."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<obs flat mark>"


#: The value of ``_obs_flat`` with which obs' own entry says "only plain scalars here, skip
#: the walk". The :class:`Redactor` honours this object only (``is``), never a caller's
#: ``_obs_flat=True`` (a keyword, a bound value or a contextvar): that cannot switch
#: nested redaction off.
FLAT: Any = _FlatMark()


def plain_values(fields: Mapping[str, Any]) -> bool:
    """True when every value is a str/int/float/bool/None shorter than MAX_STR: JSON takes
    it as is (NaN/inf aside, which the renderer catches). Anything else the redactor walks.

    Two C-level passes, so the common event pays a few hundred nanoseconds for it.
    """
    values = fields.values()
    return PLAIN_TYPES.issuperset(map(type, values)) and (
        not values or max(map(length_hint, values)) < MAX_STR
    )


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[truncated {len(text) - limit} chars]"


def _scrub_cut(text: str, limit: int, scrub: Callable[[str], str]) -> str:
    """``scrub(text)`` cut to ``limit`` as :func:`_truncate` cuts: scrubbed first (at most
    ``limit`` + 1 KiB of it: :func:`~obs._secrets.cut_head`), so no part of a credential
    is left at the cut."""
    size = len(text)
    head = scrub(cut_head(text, limit))
    if len(head) <= limit and size <= limit:
        return head
    return f"{head[:limit]}...[truncated {max(size, len(head)) - limit} chars]"


def _plain_str(text: str, limit: int, scrub: Callable[[str], str] | None = None) -> str:
    """An exact ``str``, truncated (scrubbed by ``scrub`` before the cut), valid UTF-8
    (lone surrogates become ``\\udxxx`` text)."""
    if type(text) is not str:
        text = str.__str__(text)  # a str subclass: its own __len__/__str__ may be broken
    text = _truncate(text, limit) if scrub is None else _scrub_cut(text, limit, scrub)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _int_text(value: int) -> str:
    try:
        return _truncate(str(int(value)), 64)
    except ValueError:  # past sys.int_info.str_digits_check_threshold
        return f"<int of {value.bit_length()} bits>"


def _torch_summary(obj: object) -> str | None:
    """A data-free summary of torch/numpy arrays (a tensor's repr can sync the GPU)."""
    cls = type(obj)
    module = cls.__module__
    if not module.startswith(("torch", "numpy")):
        return None
    try:
        if hasattr(obj, "shape") and hasattr(obj, "dtype"):
            shape = list(obj.shape)
            device = getattr(obj, "device", "cpu")
            return f"{cls.__name__}(shape={shape}, dtype={obj.dtype}, device={device})"
        if "ProcessGroup" in cls.__name__:
            size = obj.size() if hasattr(obj, "size") else "?"
            rank = obj.rank() if hasattr(obj, "rank") else "?"
            return f"<{cls.__name__} rank={rank} size={size}>"
        return _truncate(str(obj), 200)  # dtype, device, Size: short and data-free
    except BaseException:
        return None


def safe_repr(obj: object, limit: int = MAX_STR) -> str:
    """``repr(obj)`` that never raises, is data-free for tensors and bounded in length.

    Built-in containers are shown through :mod:`reprlib` (a few items, a few levels, a long
    item's head: :mod:`obs._repr`), so a million-element list costs as much as a short one.
    """
    try:
        summary = _torch_summary(obj)
        if summary is not None:
            text = summary
        elif issubclass(type(obj), (list, tuple, dict, set, frozenset, int)) and (
            type(obj) is not bool  # not isinstance: it reads a proxy's ``__class__``
        ):
            text = _REPR.repr(obj)
        else:
            text = repr(obj)
        if not isinstance(text, str):  # a __repr__ returning a non-str
            text = f"<{type(obj).__qualname__} object>"
    except BaseException as exc:  # a broken __repr__
        text = f"<unrepresentable {type(obj).__qualname__} object: {type(exc).__name__}>"
    try:
        size = len(text)
        head = scrub_text(cut_head(text, limit))  # what is shown, and past the cut
        if size <= limit and len(head) <= limit:
            return _plain_str(head, limit)
        return f"{_plain_str(head[:limit], limit)}...[truncated {size - limit} chars]"
    except BaseException:
        return f"<unrepresentable {type(obj).__qualname__} object>"


def safe_str(obj: object, limit: int = MAX_STR, scrub: Callable[[str], str] | None = None) -> str:
    """``obj`` as bounded text, never raising: a str (scrubbed by ``scrub``), an exception
    as ``Type: message`` (scrubbed), bytes decoded, anything else its safe repr."""
    if isinstance(obj, str):
        return _plain_str(obj, limit, scrub)
    if isinstance(obj, BaseException):
        try:
            return _plain_str(scrub_text(f"{type(obj).__name__}: {_exc_text(obj)}"), limit)
        except BaseException:
            return safe_repr(obj, limit)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            text = bytes(obj[: limit * 4]).decode("utf-8", "backslashreplace")
            return _plain_str(text, limit, scrub_text)
        except BaseException:
            return safe_repr(obj, limit)
    return safe_repr(obj, limit)


def _exc_text(exc: BaseException) -> str:
    """``str(exc)``, as the stdlib prints it (``KeyError: 'k'``), bounded for the builtin
    formats; a class whose own ``__str__`` raises is shown by its one argument."""
    args, own = exc.args, type(exc).__str__
    if own is not _BASE_STR and own is not _KEY_STR:
        with contextlib.suppress(BaseException):  # if its own text fails: its argument's
            return str(exc)
    if len(args) == 1:
        arg = args[0]
        if own is _KEY_STR:
            return safe_repr(arg, MAX_STR)
        if issubclass(type(arg), str):
            return _scrub_cut(str.__str__(arg), MAX_STR, scrub_text)
        if not issubclass(type(arg), BaseException):
            return safe_str(arg)
    return str(exc)


_BASE_STR, _KEY_STR = BaseException.__str__, KeyError.__str__


def error_text(exc: BaseException, limit: int = 2000) -> str:
    """An exception's text as obs writes it in an event's field (``error_message``): never
    raises, scrubbed as all exception text is (secret pairs too), then cut to ``limit``."""
    try:
        text = str(exc)
    except BaseException:  # the class's own name: a metaclass property cannot shadow it
        text = f"<unprintable {type.__dict__['__name__'].__get__(type(exc))}>"
    return scrubbed_text(text, limit)


def scrubbed_text(text: str, limit: int = MAX_STR) -> str:
    """``text`` as obs writes its own text: scrubbed (secret pairs too), then cut to
    ``limit`` (so no half of a credential is left at the cut), valid UTF-8."""
    return _plain_str(text, limit, scrub_text)


def _numpy_scalar(obj: object) -> tuple[bool, object]:
    cls = type(obj)
    if cls.__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        try:
            return True, obj.item()
        except BaseException:
            return False, None
    return False, None


def _fields_of(obj: object) -> dict[str, Any] | None:
    """The fields of a dataclass, an attrs class or a named tuple, without calling repr."""
    try:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
        attrs = getattr(type(obj), "__attrs_attrs__", None)
        if attrs is not None:
            return {a.name: getattr(obj, a.name, None) for a in attrs}
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return dict(zip(obj._fields, obj, strict=False))
    except BaseException:
        return None
    return None


class _Walk:
    """One bounded walk: depth, items per container and values in total are capped."""

    __slots__ = ("budget", "otel", "scrub", "seen")

    def __init__(self, otel: bool, scrub: Callable[[str], str] = scrub_text) -> None:
        self.otel = otel
        self.seen: set[int] = set()
        self.budget = MAX_WALK
        self.scrub = scrub

    def value(self, obj: object, depth: int) -> Any:  # noqa: C901, PLR0911, PLR0912 - one dispatch per type, hot
        self.budget -= 1
        cls = type(obj)
        if cls is str:
            self.budget -= len(obj) >> 7  # type: ignore[arg-type]  # long text: its share
            return _plain_str(obj, MAX_STR, self.scrub)  # type: ignore[arg-type]
        if cls is bool or obj is None:
            return obj
        if cls is int:
            return obj if _INT64[0] <= obj <= _INT64[1] else _int_text(obj)  # type: ignore[operator,arg-type]
        if cls is float:
            return obj if obj - obj == 0.0 else str(obj)  # type: ignore[operator]
        if isinstance(obj, SCALAR_TYPES):  # subclasses: str Enums, IntEnums, float subclasses
            if isinstance(obj, str):
                return _plain_str(obj, MAX_STR, self.scrub)
            if isinstance(obj, bool):
                return bool(obj)
            if isinstance(obj, int):
                return self.value(int(obj), depth)
            return self.value(float(obj), depth)  # type: ignore[arg-type]
        is_np, item = _numpy_scalar(obj)
        if is_np:
            return self.value(item, depth)
        if depth >= MAX_DEPTH or self.budget <= 0:
            return safe_repr(obj, 256)
        fields = _fields_of(obj) if not isinstance(obj, (Mapping, list, set, frozenset)) else None
        if fields is not None:
            return self.mapping(fields, depth)
        if isinstance(obj, Mapping):
            return self.guarded(obj, depth, self.mapping)
        if isinstance(obj, _SEQUENCES):
            return self.guarded(obj, depth, self.sequence)
        return safe_str(obj)

    def guarded(self, obj: Any, depth: int, walk: Any) -> Any:
        if id(obj) in self.seen:
            return "<recursion>"
        self.seen.add(id(obj))
        try:
            return walk(obj, depth)
        except BaseException:
            return safe_repr(obj, 1024)
        finally:
            self.seen.discard(id(obj))

    def mapping(self, obj: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(obj.items()):
            if i >= MAX_ITEMS or self.budget <= 0:
                out["..."] = f"{_more(obj, i)} more items"
                break
            # A key is text too: ``{"password=x": 1}`` names a secret, and holds it.
            if isinstance(k, str):
                self.budget -= len(k) >> 7  # a long key costs its share of the walk
                key = _plain_str(k, MAX_KEY, self.scrub)
            else:
                key = safe_str(k, MAX_KEY)
            if key in out:  # two keys that read the same once scrubbed: both kept
                key = f"{key}.{i}"
            secret = is_secret_key(k if type(k) is str else key)  # a long name's end too
            out[key] = REDACTED if secret else self.value(v, depth + 1)
        for name_key, value_key in _NAMED_VALUES:  # {"name": "HF_TOKEN", "value": ...}
            if value_key in out and is_secret_pair_name(out.get(name_key)):
                out[value_key] = REDACTED
        return out

    def sequence(self, obj: Any, depth: int) -> list[Any]:
        if type(obj) in _PAIR_TYPES and len(obj) >= 2 and is_secret_pair_name(obj[0]):
            if len(obj) == 2:
                return [self.value(obj[0], depth + 1), REDACTED]  # ("X-Api-Key", value)
            if obj[0][:1] != "-":  # ("Authorization", "Bearer x", True): an HPACK header
                return [self.value(obj[0], depth + 1)] + [_flag(v) for v in obj[1:MAX_ITEMS]]
        items: Iterable[object] = obj
        if isinstance(obj, (set, frozenset)):
            items = sorted(itertools.islice(obj, MAX_ITEMS), key=lambda x: safe_repr(x, 200))
        out: list[Any] = []
        flag = False  # the item before was a secret-named option: ["--hf-token", value]
        for i, v in enumerate(items):
            if i >= MAX_ITEMS or self.budget <= 0:
                out.append(f"... {_more(obj, i)} more items")
                break
            out.append(REDACTED if flag else self.value(v, depth + 1))
            flag = not flag and type(v) is str and v[:1] == "-" and "=" not in v
            flag = flag and is_secret_key(v)
        return out


#: What the walk shows item by item: sequences, sets, a dict's views (``.items()`` is a
#: list of pairs), deques.
_SEQUENCES = (list, tuple, set, frozenset, MappingView, deque)
#: A record naming its own value: a Kubernetes env var, an OTLP KeyValue, an AWS tag.
_NAMED_VALUES = (("name", "value"), ("key", "value"), ("Name", "Value"), ("Key", "Value"))
#: The kinds of a (name, value) pair: a header list's items, gRPC metadata, a dict's items.
_PAIR_TYPES = frozenset({tuple, list})


def is_secret_pair_name(name: object) -> bool:
    """Whether a tuple or list starting with ``name`` is a secret (name, value, ...) pair:
    its name is a str (not a subclass's own idea of one) or bytes (a raw header) that
    looks secret."""
    if type(name) is bytes:
        name = name[:MAX_KEY].decode("latin-1")
    return isinstance(name, str) and is_secret_key(name)


def _flag(value: object) -> object:
    """An item after a secret name and its value: a flag or a number stays (HPACK's
    never-index bit), anything else may carry the credential on."""
    return value if value is None or type(value) in (bool, int, float) else REDACTED


def _more(obj: object, shown: int) -> int | str:
    """How many items of ``obj`` were not shown (``?`` when its length is unknown)."""
    try:
        return len(obj) - shown  # type: ignore[arg-type]
    except BaseException:
        return "?"


def to_jsonable(obj: object, scrub: Callable[[str], str] = scrub_text) -> Any:
    """A JSON-serialisable, redacted copy of ``obj``: str keys, bounded, no cycles. ``scrub``:
    what each str gets (the renderer, whose values the Redactor scrubbed already, passes
    :func:`scrub_credentials`: scanning them for pairs again cost a long line twice)."""
    try:
        return _Walk(otel=False, scrub=scrub).value(obj, 0)
    except BaseException:
        return safe_repr(obj)


def to_otel_value(obj: object) -> Any:
    """An OTel ``AnyValue``-safe copy: scalars, lists, str-keyed dicts; objects become str.

    Unlike the SDK's own coercion this never logs a warning per call and never returns
    something the protobuf encoder could choke on at export time.
    """
    cls = type(obj)
    if cls is bool or (cls is int and _INT64[0] <= obj <= _INT64[1]):  # type: ignore[operator]
        return obj
    if isinstance(obj, str) and cls is str and len(obj) <= MAX_STR and obj.isascii():
        return obj
    if cls is float:
        # NaN/inf become "nan"/"inf", as in the JSON line, so both routes carry one value.
        return obj if obj - obj == 0.0 else str(obj)  # type: ignore[operator]
    try:
        return _Walk(otel=True).value(obj, 0)
    except BaseException:
        return safe_repr(obj)


def json_default(obj: object) -> Any:
    """``orjson`` ``default=`` hook: called only for types orjson cannot encode itself."""
    return to_jsonable(obj) if not isinstance(obj, str) else _plain_str(obj, MAX_STR, scrub_text)


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _format_chain(exc: BaseException, tree: Tree | None = None) -> str:
    """The traceback text of ``exc`` and at most :data:`MAX_CHAIN` - 1 causes before it
    (fewer when ``tree``, the trace's whole group of exceptions, has shown its share)."""
    tree = Tree(MAX_STACK) if tree is None else tree
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    link = ""
    while cur is not None and id(cur) not in seen and len(chain) < MAX_CHAIN and tree.take():
        seen.add(id(cur))
        chain.append((cur, link))
        if cur.__cause__ is not None:
            cur, link = cur.__cause__, _CAUSE
        elif cur.__context__ is not None and not cur.__suppress_context__:
            cur, link = cur.__context__, _CONTEXT
        else:
            cur = None
    parts: list[str] = []
    if cur is not None and id(cur) not in seen:
        parts.append(f"[{chain_rest(cur)} earlier exceptions in the chain not shown]\n")
    for item, link in reversed(chain):
        parts.append(_format_one(item, tree))
        if link:
            parts.append(link)
    return "".join(parts)


def _format_one(exc: BaseException, tree: Tree) -> str:
    """One exception's traceback text, notes and a group's members, without walking its
    cause chain (the stdlib's ``TracebackException`` walks all of it, unbounded)."""
    out: list[str] = []
    group = is_group(exc)
    if exc.__traceback__ is not None:
        shown = tree.traceback(exc.__traceback__)
        out.append(f"{'Exception Group ' if group else ''}Traceback (most recent call last):\n")
        if shown is None:
            out.append(f"  [frames not shown: this trace showed {MAX_FRAMES}]\n")
        for line in frame_lines(shown):
            if not tree.add(out, _scrub_cut(line, 4096, scrub_text)):
                break  # past the cut: not scrubbed for nothing
    cls = type(exc)
    name = (
        cls.__qualname__
        if cls.__module__ in ("builtins", "__main__")
        else f"{cls.__module__}.{cls.__qualname__}"
    )
    try:
        text = _exc_text(exc)
    except BaseException:
        text = f"<exception str() failed: {safe_repr(exc, 200)}>"
    tree.add(out, f"{name}: {_scrub_cut(text, 4096, scrub_text)}\n" if text else f"{name}\n")
    out.append(notes(exc, lambda note: safe_str(note, 4096, scrub_text), tree))  # spent there
    return "".join(out) + (members(exc, _format_chain, tree) if group else "")


def format_exception(value: object) -> dict[str, str] | None:
    """``exc_info`` (True, an exception or a 3-tuple) as OTel ``exception.*`` fields.

    Bounded: at most :data:`MAX_CHAIN` exceptions of a cause chain and 50 frames each are
    formatted; URL passwords and bearer tokens in the text are redacted.
    """
    try:
        info = exc_tuple(value)
        if info is None:
            return None
        etype, exc, _tb = info
        if exc.__traceback__ is None and _tb is not None:
            exc = exc.with_traceback(_tb)
        name = (
            f"{etype.__module__}.{etype.__qualname__}"
            if etype.__module__ not in ("builtins", "__main__")
            else etype.__qualname__
        )
        try:
            message = _plain_str(_exc_text(exc), MAX_STR, scrub_text)
        except BaseException:
            message = f"<exception str() failed: {safe_repr(exc, 200)}>"
        # The trace's pieces, within a quarter of a log call's budget (the whole trace is
        # scrubbed again below, for pairs across lines; the Redactor does not scan these
        # fields again): past it, a piece is [REDACTED] and the trace ends soon after.
        budget = open_budget(SCRUB_CHARS // 4)
        try:
            trace = _format_chain(exc)
        finally:
            close_budget(budget)
        return {
            "exception.type": _plain_str(name, MAX_KEY, scrub_text),
            "exception.message": message,
            "exception.stacktrace": _plain_str(trace, MAX_STACK, scrub_text),
        }
    except BaseException as err:
        return {
            "exception.type": "unknown",
            "exception.message": safe_repr(err),
            "exception.stacktrace": "",
        }


def body_text(body: object, event: object) -> str:
    """The ``body`` field as the one text both routes carry (the JSON line and the OTLP
    record body): a str as its exact, bounded text, None as the event name, anything else
    as its bounded safe repr (of the redacted copy, in the chain)."""
    if body is None:
        return event if type(event) is str else safe_repr(event, 1024)
    if isinstance(body, str):
        return _plain_str(body, MAX_STR)
    return safe_repr(body)
