"""An exception as caught: raised in a frame named ``_raise``, so its traceback has one."""

from __future__ import annotations


def _raise(exc: BaseException) -> None:
    raise exc


def raised(exc: BaseException) -> BaseException:
    """``exc`` raised and caught, its traceback holding the ``_raise`` frame."""
    try:
        _raise(exc)
    except BaseException as caught:
        return caught
    raise AssertionError("not raised")
