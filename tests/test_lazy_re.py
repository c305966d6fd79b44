"""Patterns compiled on first use: ``import obs`` compiles none of obs' own, and a lazy
pattern answers every call as the compiled one does."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from obs._lazy_re import lazy

ROOT = Path(__file__).resolve().parents[1]

COUNT_COMPILES = """
import re
compiled = []
real = re._compile
def counting(pattern, flags):
    compiled.append(pattern)
    return real(pattern, flags)
re._compile = counting
import obs
import obs._secrets
lazy = {v._source for v in vars(obs._secrets).values() if type(v).__name__ == "_Lazy"}
print(len(lazy), len(lazy & set(compiled)))
"""


def test_import_obs_compiles_none_of_the_scrubbers_patterns() -> None:
    """The scrubber's patterns cost a few milliseconds of ``import obs`` (about a tenth of
    it) when compiled at import; now the first call needing one compiles it."""
    out = subprocess.run(
        [sys.executable, "-c", COUNT_COMPILES],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=True,
    ).stdout  # fmt: skip
    kept, compiled = map(int, out.split())
    assert (kept >= 10, compiled) == (True, 0), out


@given(
    text=st.text(alphabet="ab=: \n%@x", max_size=30),
    flags=st.sampled_from([0, re.IGNORECASE, re.MULTILINE]),
)
@settings(max_examples=100, deadline=None)
def test_a_lazy_pattern_answers_as_the_compiled_one(text: str, flags: int) -> None:
    """Every method, before and after the first call compiled it."""
    source = r"(a+)(?:=|:)\s*(\w*)"
    lazy_one, real = lazy(source, flags), re.compile(source, flags)
    assert lazy_one.pattern == real.pattern
    assert lazy_one.flags == real.flags
    for _ in range(2):  # the first round compiles, the second uses the bound methods
        assert [m.span() for m in lazy_one.finditer(text)] == [
            m.span() for m in real.finditer(text)
        ]
        assert lazy_one.findall(text) == real.findall(text)
        assert lazy_one.sub("<\\2>", text) == real.sub("<\\2>", text)
        assert lazy_one.subn("-", text) == real.subn("-", text)
        assert lazy_one.split(text) == real.split(text)
        for method in ("search", "match", "fullmatch"):
            got, want = getattr(lazy_one, method)(text), getattr(real, method)(text)
            assert (got and got.span()) == (want and want.span())
    assert repr(lazy_one) == f"lazy({source!r})"


def test_threads_compiling_at_once_get_one_answer() -> None:
    """Eight threads making the first call together: every one gets the right match."""
    pattern = lazy(r"token=(\w+)")
    results: list[str | None] = []
    start = threading.Barrier(8)

    def first_call() -> None:
        start.wait()
        found = pattern.search("x token=abc y")
        results.append(found and found[1])

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["abc"] * 8
