"""Any bytes in a spool file cost only themselves: never a replay's or a listing's end.

Lines nested deeper than the recursion limit make ``json.loads`` raise RecursionError
(not ValueError): the replay raised at such a line for ever, stranding the spool.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from obs._spool import Spool

_DEEP = st.builds(
    lambda opener, closer, n: opener * n + b"1" * (opener == b'{"a":') + closer * n,
    st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]).map(lambda p: p[0]),
    st.sampled_from([b"]", b"}"]),
    st.integers(min_value=900, max_value=200_000),
).map(lambda line: line + b"\n")
#: A junk line: nested too deep for json, or any bytes (one line, newline-terminated).
_JUNK = st.one_of(
    _DEEP,
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


@settings(max_examples=25, deadline=None)
@given(
    layout=st.lists(st.one_of(st.none(), _JUNK), min_size=1, max_size=10),
    lost=st.one_of(st.none(), _JUNK),
    batch_size=st.integers(min_value=1, max_value=4),
)
@example(layout=[b"[" * 100_000 + b"]" * 100_000 + b"\n", None], lost=None, batch_size=4)
@example(layout=[None], lost=b"[" * 100_000 + b"]" * 100_000, batch_size=1)
def test_junk_anywhere_costs_only_itself(
    layout: list[bytes | None], lost: bytes | None, batch_size: int
) -> None:
    """Records (None in ``layout``) and junk lines in any order, and junk in place of the
    kept loss reports: ``scan`` lists the records, one replay hands each over once, in
    order, counts every line that is not a record, and empties the spool."""
    with tempfile.TemporaryDirectory() as tmp:
        spool = Spool(tmp, 1 << 24)
        records = [f"u{i}" for i, junk in enumerate(layout) if junk is None]
        _write(
            os.path.join(tmp, "spool.jsonl"),
            b"".join(
                json.dumps({"uid": f"u{i}"}).encode() + b"\n" if junk is None else junk
                for i, junk in enumerate(layout)
            ),
        )
        if lost is not None:
            _write(os.path.join(tmp, "spool.lost.json"), lost)
        listed = [uid for doc in spool.scan() if (uid := doc.get("uid")) is not None]
        took: list[Any] = []

        def export(batch: list[dict[str, Any]]) -> bool:
            took.extend(doc.get("uid") for doc in batch)
            return True

        result = spool.replay(export, batch_size, merge=lambda kept, new: kept)
        counted = sum(
            1 for junk in layout if junk is not None and not isinstance(_parsed(junk), dict)
        )
        assert (records, records, False) == (
            listed,
            [uid for uid in took if uid is not None],
            result.failed,
        )
        assert (counted, False) == (result.corrupt, spool.pending())


def _parsed(line: bytes) -> object:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None
