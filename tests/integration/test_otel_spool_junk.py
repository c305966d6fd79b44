"""A spool line no JSON parser can take: nested deeper than the interpreter's recursion
limit (``json.loads`` raises RecursionError, not ValueError). It is one corrupt line,
counted: it never strands the records behind it. Real sink, real loopback collector.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_otel_rejections import PROTOCOLS, _spool_line, picky_sink  # noqa: F401

from obs._spool import Spool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

#: Spool lines json.loads raises RecursionError on (a list, an object, one in a record).
DEEP = [
    b"[" * 100_000 + b"]" * 100_000 + b"\n",
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n",
    b'{"v":1,"cls":3,"attrs":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n",
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("deep", DEEP, ids=["list", "object", "in-record"])
def test_a_spool_line_nested_too_deep_is_one_corrupt_line(
    picky_sink: Any,  # noqa: F811 - the fixture
    tmp_path: Path,
    protocol: str,
    deep: bytes,
) -> None:
    """Such a line at the spool's head and in its middle: every other record is replayed,
    each line counted and reported as a ``spool_corrupt`` drop, and the spool emptied.
    The replay raised at the line, before sending anything of its batch, and every later
    replay (this process's, the next one's) at the same line: the spool was stranded."""
    directory = tmp_path / "spool"
    directory.mkdir(mode=0o700)
    good = ["g0", "g1", "g2", "g3"]
    path = directory / "spool.jsonl"
    path.write_bytes(
        deep + _spool_line("g0") + _spool_line("g1") + deep + _spool_line("g2") + _spool_line("g3")
    )
    os.chmod(path, 0o600)
    picky, sink, reports = picky_sink(protocol)
    assert sink.force_flush(10.0)
    stats = sink.stats()
    sink.shutdown(2.0)
    drops = [f for name, _, f in reports.calls if name == "obs_records_dropped"]
    assert (sorted(good), 2, {"UNKNOWN": 2}) == (
        sorted(picky.events()),
        stats["spool_corrupt"],
        stats["dropped_by_reason"].get("spool_corrupt"),
    )
    assert [("spool_corrupt", 2)] == [(d["reason"], d["count"]) for d in drops]
    assert not Spool(str(directory), 1 << 20).pending()
