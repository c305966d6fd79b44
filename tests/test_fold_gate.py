"""Text read as read only where that may find a secret (:func:`obs._fold.read_hint`).

Chinese text uses fullwidth punctuation (U+FF0C, U+FF1A, U+FF08): NFKC changes it, so the
first cut of reading text as read folded every such value and scrubbed every field of its
call (21 us -> 83 us a call). Where only punctuation and blanks read otherwise the words
are the text's own: no fold, unless a secret word, ``@`` or a scheme is there already.
"""

from __future__ import annotations

from typing import Any

import pytest
from _written import written
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs._secrets
import obs.testing
from obs._fold import folded, read_hint, read_secret_hint
from obs._secrets import scrub_text

#: Chinese text and its punctuation, fullwidth and ideographic.
CHINESE = "模型加载完成耗时秒共卡显存不足请稍后重试"
PUNCT = "，：（）！？；、。「」　"  # noqa: RUF001 - the text under test
#: What a hostile or copied name is spelled with: fullwidth letters and signs,
#: mathematical letters, invisible characters.
#: Latin letters and digits as Japanese text writes them (fullwidth).
WIDE = "\uff27\uff30\uff35\uff10\uff13\uff48\uff46\uff4b\uff59"
SPELLS = "ｐａｓｗｏｒｄｔｋｅｎ＝＠＿－" + "\U0001d429\U0001d41a" + "\u200b\u00ad\u2060"  # noqa: RUF001


def test_chinese_text_with_its_punctuation_is_not_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call of Chinese values with fullwidth punctuation never folds a text, and its
    line holds them byte for byte."""
    calls: list[str] = []

    def spy(text: str) -> str:
        calls.append(text)
        return folded(text)

    monkeypatch.setattr(obs._secrets, "folded", spy)
    text = "模型加载完成，耗时：3秒（共8卡）"  # noqa: RUF001

    def call(log: Any) -> None:
        for _ in range(3):
            log.info("loaded", detail=text, note=f"{text}。完成")
        log.info(text)

    lines = written(call)
    assert calls == []
    assert [x.get("detail") for x in lines[:3]] == [text] * 3
    assert lines[3]["event"] == text


@pytest.mark.parametrize(
    "text",
    [
        "密码：password：hunter2",  # noqa: RUF001
        "令牌 token＝hunter2",  # noqa: RUF001
        "连接 https：／／bob:hunter2@db",  # noqa: RUF001
        "ｐａｓｓｗｏｒｄ=hunter2",  # noqa: RUF001
        "pass\u200bword=hunter2",
        "Authorization：Bearer　hunter2hunter2",  # noqa: RUF001
    ],
)
def test_a_secret_read_through_chinese_punctuation_is_redacted(text: str) -> None:
    """The gate lets through what a reader reads as a secret pair or credential."""
    assert read_hint(text)
    assert "hunter2" not in scrub_text(text)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*CHINESE, *PUNCT, *SPELLS, *"abc xyz=:,-_@/.%", "password", "token", "key", "sk-"]
        ),
        max_size=30,
    ).map(lambda parts: "".join(parts) + " hunter2")
)
def test_text_not_read_as_read_holds_nothing_its_reading_would_redact(text: str) -> None:
    """Where the gate says no, scrubbing the text as read redacts nothing more than
    scrubbing it as spelled (so skipping the fold never writes a secret)."""
    if read_hint(text):
        return
    shown = folded(text)
    assert (scrub_text(shown) == shown) or (scrub_text(text) != text)


def test_japanese_text_with_fullwidth_letters_is_not_scrubbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Japanese text writes Latin letters and digits fullwidth (``GPU0`` as U+FF27...):
    read as read it holds no secret, so its call is not scrubbed field by field (13.9 ->
    47 us a call when any text read otherwise sent the call to the chain's scrub), and its
    line holds it byte for byte."""
    import obs._redactor

    calls: list[str] = []

    def spy(text: str, keep: Any = None) -> str:
        calls.append(text)
        return scrub_text(text, keep)

    monkeypatch.setattr(obs._redactor, "scrub_text", spy)
    text = "\uff27\uff30\uff35\uff10でメモリ不足が発生しました（\uff13回目）。"  # noqa: RUF001

    def call(log: Any) -> None:
        log.info("oom", detail="warm")  # the fields' names are scrubbed once, here
        calls.clear()
        log.info("oom", detail=text)

    lines = written(call)
    assert calls == []
    assert lines[1]["detail"] == text


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *CHINESE,
                *PUNCT,
                *SPELLS,
                *WIDE,
                *"abc xyz=:,-_@/.%",
                "password",
                "sk-",
            ]
        ),
        max_size=30,
    ).map(lambda parts: "".join(parts) + " hunter2")
)
def test_a_reading_not_flagged_holds_nothing_the_scrubber_would_redact(text: str) -> None:
    """Where :func:`read_secret_hint` says no, the text as read is one the scrubber keeps
    (or its spelling is scrubbed anyway): skipping the chain never writes a secret."""
    if read_secret_hint(text):
        return
    shown = folded(text)
    assert (scrub_text(shown) == shown) or (scrub_text(text) != text)
