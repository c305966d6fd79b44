"""A replay's progress that the disk refuses (its offset file cannot be written) is kept
in memory: within one process, no record is handed over twice and none is stranded."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from obs._spool import Spool


class _Refusing(Spool):
    """A spool whose offset writes fail as ``script`` says (True: the disk refuses)."""

    __slots__ = ("script",)

    def __init__(self, directory: str, script: list[bool]) -> None:
        super().__init__(directory, 1 << 20)
        self.script = iter(script)

    def _write_offset(self, offset: int) -> None:
        if next(self.script, False):
            raise OSError(errno.ENOSPC, "No space left on device")
        super()._write_offset(offset)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=20),
    refusals=st.lists(st.booleans(), max_size=12),
    answers=st.lists(st.one_of(st.booleans(), st.integers(0, 5)), max_size=8),
    batch_size=st.integers(min_value=1, max_value=5),
)
@example(n=12, refusals=[True] * 12, answers=[], batch_size=4)
def test_each_record_once_whatever_offsets_the_disk_refuses(
    n: int, refusals: list[bool], answers: list[bool | int], batch_size: int
) -> None:
    """Records replayed until done, the collector taking what ``answers`` says of each
    batch (True: all, False: none, n: the first n) and the disk refusing the offset
    writes ``refusals`` says: each record is handed over exactly once, in order, and
    the spool ends empty."""
    with tempfile.TemporaryDirectory() as tmp:
        spool = _Refusing(tmp, refusals)
        spool.append([{"uid": f"u{i}"} for i in range(n)])
        took: list[str] = []
        script = iter(answers)

        def export(batch: list[dict[str, Any]]) -> bool | int:
            answer = next(script, True)
            done = len(batch) if answer is True else min(int(answer), len(batch))
            took.extend(doc["uid"] for doc in batch[:done])
            return answer

        errors = 0
        for _ in range(len(answers) + n + 3):
            result = spool.replay(export, batch_size)
            errors += result.error is not None
            if not result.failed and not spool.pending():
                break
        assert [f"u{i}" for i in range(n)] == took
        assert not spool.pending()
        assert (errors > 0) <= any(refusals)
        assert json.dumps(sorted(os.listdir(tmp))) == json.dumps(["replay.lock"])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=8),
    done=st.integers(min_value=0, max_value=8),
    offset=st.one_of(
        st.integers(min_value=-(10**20), max_value=10**20).map(str),
        st.text(max_size=12),
    ),
)
@example(n=3, done=0, offset="-5")
@example(n=3, done=0, offset="99999999")
def test_any_offset_file_loses_and_strands_nothing(n: int, done: int, offset: str) -> None:
    """A replay left ``done`` records delivered and its offset file then holds anything
    (a number past the file, a negative one, text): the next replay hands over every
    record not delivered yet (some perhaps again) and empties the spool. A negative
    offset raised at the seek for ever (the spool stranded); one past the end deleted
    the replay file unread (its records lost, counted nowhere)."""
    with tempfile.TemporaryDirectory() as tmp:
        spool = Spool(tmp, 1 << 20)
        spool.append([{"uid": f"u{i}"} for i in range(n)])
        first: list[str] = []

        def partial(batch: list[dict[str, Any]]) -> int:
            first.extend(doc["uid"] for doc in batch[:done])
            return min(done, len(batch))

        spool.replay(partial, n)
        with open(os.path.join(tmp, "spool.replay.offset"), "w") as f:
            f.write(offset)
        os.chmod(os.path.join(tmp, "spool.replay.offset"), 0o600)
        took: list[str] = []

        def export(batch: list[dict[str, Any]]) -> bool:
            took.extend(doc["uid"] for doc in batch)
            return True

        again = Spool(tmp, 1 << 20)  # the next process: no progress in memory
        result = again.replay(export, 4)
        missing = {f"u{i}" for i in range(n)} - set(first) - set(took)
        assert (set(), False, False) == (missing, result.failed, again.pending())
