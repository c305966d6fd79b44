"""Warnings routed by ``logging.captureWarnings(True)`` (torch's and vLLM's
``warnings.warn``) name the line that warned, not the stdlib's ``_showwarnmsg``."""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


@pytest.fixture
def captured() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        logging.captureWarnings(True)
        try:
            yield
        finally:
            logging.captureWarnings(False)


def _helper(message: str, stacklevel: int) -> None:
    warnings.warn(message, UserWarning, stacklevel=stacklevel)


def _line() -> int:
    frame = inspect.currentframe()
    assert frame is not None
    assert frame.f_back is not None
    return frame.f_back.f_lineno + 1


def _where(record: dict[str, Any]) -> tuple[str, int, str]:
    return record["code.file.path"], record["code.line.number"], record["code.function.name"]


@pytest.mark.usefixtures("captured")
class TestCapturedWarnings:
    def test_a_warning_names_its_line(self, configure_json: Configure) -> None:
        read = configure_json()
        line = _line()
        warnings.warn("plain warning", UserWarning, stacklevel=1)
        (record,) = [r for r in read() if r["logger"] == "py.warnings"]
        assert (__file__, line, "TestCapturedWarnings.test_a_warning_names_its_line") == (
            _where(record)
        )
        assert record["severity_text"] == "WARNING"

    @pytest.mark.parametrize("stacklevel", [1, 2])
    def test_the_warnings_stacklevel_is_the_line(
        self, configure_json: Configure, stacklevel: int
    ) -> None:
        """A library's warn(..., stacklevel=2) names its caller's line, as warnings does."""
        read = configure_json()
        line = _line()
        _helper(f"from helper {stacklevel}", stacklevel)
        (record,) = [r for r in read() if r["logger"] == "py.warnings"]
        if stacklevel == 2:
            expected = (
                __file__,
                line,
                "TestCapturedWarnings.test_the_warnings_stacklevel_is_the_line",
            )
        else:
            expected = (__file__, inspect.getsourcelines(_helper)[1] + 1, "_helper")
        assert expected == _where(record)

    def test_warn_explicit_names_the_given_place(self, configure_json: Configure) -> None:
        """A warning for a place not on the stack (warn_explicit): its file and line, no
        function."""
        read = configure_json()
        warnings.warn_explicit("explicit", UserWarning, "/srv/app/conf.py", 12)
        (record,) = [r for r in read() if r["logger"] == "py.warnings"]
        assert ("/srv/app/conf.py", 12, "") == _where(record)

    def test_a_record_of_ones_own_on_py_warnings_keeps_its_line(
        self, configure_json: Configure
    ) -> None:
        """Logging to py.warnings oneself (text in the same shape) keeps the caller's line."""
        read = configure_json()
        line = _line()
        logging.getLogger("py.warnings").warning("/x.py:3: UserWarning: own")
        (record,) = [r for r in read() if r["logger"] == "py.warnings"]
        assert (__file__, line) == _where(record)[:2]
