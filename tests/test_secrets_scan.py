"""The scrubber's pair scans skip where no pair can start and find exactly what a scan at
every character finds: an authorization pair is tried only where a name holding ``auth``
starts, a pair name is not looked for in a run of blanks or in a text without a
separator."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from obs import _secret_names, _secrets
from obs._secrets import REDACTED

#: Pieces whose joins make the scans' hard cases: names that hold ``auth`` or end in it,
#: separators, runs of blanks, escaped line breaks, quotes, delimiters, a redacted value,
#: and name characters past ASCII (``é``, the Kelvin sign, a dotted capital I).
PIECES = ["auth", "Auth", "AUTH", "Authorization", "x-auth", "proxy.authentication", "oauth",
          "authx", "token", "--hf-token", "-", ".", "_", ":", "=", "=>", ",", ";", "&", ")",
          "]", "[", " ", "\t", "\n", "\r\n", "\\n", "\\", "'", '"', "x", "1", "é", "\u212a",
          "\u0130", "auth\u212a", REDACTED, "cookie", "Cookie: a=1"]  # fmt: skip
TEXTS = st.lists(st.sampled_from(PIECES), max_size=24).map("".join)


def _mark(match: re.Match[str]) -> str:
    return f"<{match.start()}:{match.group()}>"


class TestAuthPairs:
    @settings(max_examples=400)
    @given(TEXTS)
    def test_finds_what_a_scan_at_every_character_finds(self, text: str) -> None:
        """``_auth_pairs`` replaces the same matches, at the same places, as
        ``_AUTH_PAIR``'s scan of the whole text."""
        expected = _secrets._sub(_secrets._AUTH_PAIR, text, _mark)
        assert expected == _secrets._auth_pairs(text, _mark)

    def test_a_text_of_line_breaks_after_names_is_redacted(self) -> None:
        """The benchmark's worst value: each authorization name's value is redacted."""
        text = ("Authorization:" + "\n" * 50) * 4 + "Authorization: Bearer abcdefgh"
        scrubbed = _secrets.scrub_text(text)
        assert "abcdefgh" not in scrubbed
        assert scrubbed.count(REDACTED) == 3  # two names read as the values before them

    def test_a_long_name_before_auth_is_one_run(self) -> None:
        """A name longer than the walk's chunk, past ASCII, still starts where its run does."""
        text = "é" * 70 + "x" * 200 + "_auth: secret-value, " + "auth" * 40 + ": v"
        expected = _secrets._sub(_secrets._AUTH_PAIR, text, _mark)
        assert expected == _secrets._auth_pairs(text, _mark)
        assert "secret-value" not in _secrets._auth_pairs(text, lambda m: REDACTED)


class TestPairNameSkips:
    @settings(max_examples=400)
    @given(TEXTS, st.integers(min_value=0, max_value=200))
    def test_no_pair_starts_in_a_run_of_other_characters(self, text: str, at: int) -> None:
        """Searching from past a run of blanks and delimiters finds the same pair name."""
        pos = min(at, len(text))
        skipped = _secrets._NOT_NAME.match(text, pos)
        assert skipped is not None
        found = _secrets._PAIR_NAME.search(text, pos)
        again = _secrets._PAIR_NAME.search(text, skipped.end())
        assert (found and (found.span(), found.groups())) == (
            again and (again.span(), again.groups())
        )

    @settings(max_examples=200)
    @given(TEXTS)
    def test_no_pair_without_a_separator_or_an_option(self, text: str) -> None:
        """A text with no ``=``, ``:``, ``,`` or ``-`` holds no pair name at all."""
        bare = text.translate(str.maketrans("", "", "=:,-"))
        assert _secrets._PAIR_NAME.search(bare) is None


def _hinted_everywhere(low: str) -> bool:
    """The name-hint test as it was: every hint searched for in the whole name."""
    return any(hint in low for hint in _secret_names.NAME_HINTS)


#: Names made of hint words, their letters alone and other letters (``ab1``: a long name
#: without the letters that gate the searches).
NAME_PIECES = [*_secret_names.NAME_HINTS, "k", "p", "h", "c", "s", "j", "b", "y", "e", "ab1",
               "_", "-", "x" * 40, "\0"]  # fmt: skip


class TestNameHints:
    @settings(max_examples=400)
    @given(st.lists(st.sampled_from(NAME_PIECES), max_size=30).map("".join))
    def test_gated_searches_find_what_searching_everywhere_finds(self, low: str) -> None:
        """``hinted`` (a hint searched only where one of its letters is) answers as
        searching for every hint in the whole name does."""
        assert _hinted_everywhere(low) == _secret_names.hinted(low)


LONG_PIECES = ["api", "Api", "Key", "key", "_", "token", "Token", "max", "Num", "x" * 100, "7"]


class TestLongNames:
    @settings(max_examples=100)
    @given(st.lists(st.sampled_from(LONG_PIECES), min_size=8, max_size=40).map("".join))
    def test_a_long_name_decided_from_the_cache_as_anew(self, name: str) -> None:
        """A name past MAX_KEY is decided by its ends, kept under them: asked again (its
        lower-cased twin in between, which its camelCase may split otherwise) it gets the
        answer a fresh decision gives."""
        name = name.rjust(_secret_names.MAX_KEY + 1, "x")
        twin = name.lower()
        _secrets._LONG_CACHE.clear()
        fresh = _secrets.is_secret_name(name)
        _secrets._LONG_CACHE.clear()
        fresh_twin = _secrets.is_secret_name(twin)
        _secrets._LONG_CACHE.clear()
        assert (fresh, fresh_twin, fresh) == tuple(map(_secrets.is_secret_name, (name, twin, name)))

    def test_camel_case_decides_a_long_name_each_time(self) -> None:
        """``...xApiKey`` is secret and ``...xapikey`` is not, asked in any order, twice."""
        secret, plain = "x" * 300 + "ApiKey", "x" * 300 + "apikey"
        assert [True, False, True, False] == [
            _secrets.is_secret_name(n) for n in (secret, plain, secret, plain)
        ]
