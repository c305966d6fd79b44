"""An exception's message as the stdlib prints it: ``KeyError: 'k'``, not ``KeyError: k``.

``exception.message`` and the trace's last line are ``str(exc)`` (scrubbed): a class that
formats its own text (``KeyError``'s quotes, a custom ``__str__``) is shown as it prints.
"""

from __future__ import annotations

import traceback

from _exc import raised
from hypothesis import given, settings
from hypothesis import strategies as st

from obs.encode import format_exception, to_jsonable


class _Custom(Exception):
    def __str__(self) -> str:
        return f"custom<{self.args[0]}>"


class _Plain(RuntimeError):
    """Inherits BaseException's text: one str arg is shown as it is."""


_KINDS = (KeyError, ValueError, RuntimeError, _Custom, _Plain, LookupError, OSError)


def test_a_key_error_reads_as_the_stdlib_prints_it() -> None:
    fields = format_exception(raised(KeyError("k")))
    assert fields is not None
    assert fields["exception.message"] == "'k'"
    assert fields["exception.stacktrace"].endswith("KeyError: 'k'\n")
    assert to_jsonable(KeyError("k")) == "KeyError: 'k'"


def test_a_class_with_its_own_str_reads_as_it_prints() -> None:
    fields = format_exception(raised(_Custom("x")))
    assert fields is not None
    assert fields["exception.message"] == "custom<x>"
    assert fields["exception.stacktrace"].endswith("_Custom: custom<x>\n")


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(_KINDS),
    text=st.text(
        st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters="=:_-@/%\\"),
        max_size=40,
    ),
)
def test_any_one_arg_exception_reads_as_the_stdlib_prints_it(
    kind: type[BaseException], text: str
) -> None:
    exc = raised(kind(text))
    fields = format_exception(exc)
    assert fields is not None
    assert fields["exception.message"] == str(exc)
    last = traceback.format_exception_only(type(exc), exc)[-1]
    assert fields["exception.stacktrace"].endswith(last)
