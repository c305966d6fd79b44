"""Records that went through ``logging.handlers.QueueHandler`` (the stdlib's multi-process
logging pattern: QueueHandler in the workers, a QueueListener in front of obs' handler) keep
their event.

``QueueHandler.prepare()`` formats the record before queueing it: ``msg`` becomes the
message with the traceback (``logger.exception``) and the stack (``stack_info=True``)
appended, and ``exc_info``/``exc_text``/``stack_info`` are cleared. obs took that whole text
for the event, so ``logger.exception("workspace_terminal_failure", ...)`` arrived as
``"workspace_terminal_failure\\nTraceback (most recent call last): ..."`` and the alert's
``| event="workspace_terminal_failure"`` missed it. The event is now the text before the
appended traceback or stack, which stays in the body.
"""

from __future__ import annotations

import logging
import logging.handlers
import queue
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs.stdlib import ObsHandler

ALERT = "workspace_terminal_failure"


def _through_a_queue(emit: Any) -> list[dict[str, Any]]:
    """Log with ``emit(logger)`` through a QueueHandler, delivered to obs' root handler by a
    QueueListener (as the logging cookbook sets up several processes)."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        (handler,) = [h for h in logging.getLogger().handlers if isinstance(h, ObsHandler)]
        channel: queue.Queue[logging.LogRecord] = queue.Queue()
        worker = logging.getLogger("worker.queued")
        worker.propagate = False
        sender = logging.handlers.QueueHandler(channel)
        worker.addHandler(sender)
        listener = logging.handlers.QueueListener(channel, handler)
        with obs.testing.capture_events() as events:
            listener.start()
            try:
                emit(worker)
            finally:
                listener.stop()
                worker.removeHandler(sender)
                worker.propagate = True
    finally:
        obs.testing.reset()
    return events


def _fail(message: str) -> None:
    raise RuntimeError(message)


@settings(max_examples=40)
@given(
    exception=st.booleans(),
    stack=st.booleans(),
    message=st.text(st.characters(blacklist_categories=["Cs"]), max_size=40),
)
def test_queued_records_keep_their_event(exception: bool, stack: bool, message: str) -> None:
    """Whatever was appended (a traceback of any message, a stack), the event is the
    record's own text and the body still carries what was appended."""

    def emit(log: logging.Logger) -> None:
        extra = {"stage": "terminal_failure", "chain": "fi_ar"}
        if exception:
            try:
                _fail(message)
            except RuntimeError:
                log.exception(ALERT, extra=extra, stack_info=stack)
        else:
            log.error(ALERT, extra=extra, stack_info=stack)

    events = _through_a_queue(emit)
    (record,) = events
    assert (ALERT, "ERROR", "terminal_failure", "fi_ar") == (
        record["event"], record["severity_text"], record["stage"], record["chain"],
    )  # fmt: skip
    if exception:
        assert "Traceback (most recent call last):" in record["body"]
    if stack:
        assert "Stack (most recent call last):" in record["body"]


def test_a_plain_multiline_message_is_unchanged() -> None:
    """Only an appended traceback or stack is cut off the event: other lines stay."""
    events = _through_a_queue(lambda log: log.error("first line\nsecond line"))
    assert ["first line\nsecond line"] == [e["event"] for e in events]


ODD = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.text(max_size=10),
    st.binary(max_size=5),
    st.lists(st.integers(), max_size=2),
)


_REBUILT = ["name", "pathname", "lineno", "funcName", "created", "levelname", "module",
            "thread", "process", "stack_info", "msecs", "args", "exc_info", "exc_text",
            "levelno"]  # fmt: skip


@settings(max_examples=80)
@given(attributes=st.dictionaries(st.sampled_from(_REBUILT), ODD))
def test_rebuilt_records_with_odd_attributes_keep_the_alert(attributes: dict[str, Any]) -> None:
    """A record rebuilt by ``logging.makeLogRecord`` (a SocketHandler's or a queue's receiver)
    with odd attribute types is written with its event: ``name=None`` was dropped (the
    handler's export check read ``record.name.startswith``)."""
    obs.configure(stream="none", sdk_disabled=True)
    try:
        (handler,) = [h for h in logging.getLogger().handlers if isinstance(h, ObsHandler)]
        record = logging.makeLogRecord(
            {"msg": ALERT, "args": None, "levelno": logging.ERROR, "stage": "terminal_failure",
             "chain": "fi_ar", **attributes}
        )  # fmt: skip
        with obs.testing.capture_events() as events:
            handler.handle(record)
    finally:
        obs.testing.reset()
    assert [(ALERT, "ERROR", "fi_ar")] == [
        (e["event"], e["severity_text"], e["chain"]) for e in events if e["event"] == ALERT
    ]
