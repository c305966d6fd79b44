"""Secret names spelled so that a reader sees the name but a byte match does not:
compatibility forms (``password`` in fullwidth or mathematical letters, a fullwidth
``=``) and invisible characters (a zero-width space, a soft hyphen, a word joiner) inside
the name. The scrubber reads text as a reader does (NFKC, invisible characters dropped),
in field names, values, bodies, obs' own messages and the OTLP record; text without a
secret is kept byte for byte."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from _written import written
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver

SECRET = "Qx7hunter2Qx7"
#: Invisible characters a copied name may carry (or a hostile one hides behind).
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u00ad", "\u2060", "\ufeff", "\u180e"]


def _wide(text: str) -> str:
    """``text`` in fullwidth forms (U+FF01 to U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _bold(text: str) -> str:
    """``text``'s lower-case letters as mathematical bold ones (NFKC: the letters)."""
    return "".join(chr(0x1D41A + ord(c) - 97) if "a" <= c <= "z" else c for c in text)


def _read(text: str) -> str:
    """What a reader sees: NFKC, invisible characters dropped."""
    return "".join(c for c in unicodedata.normalize("NFKC", text) if c not in INVISIBLE)


#: Secret pairs as text, each name spelled so a reader still reads it.
TEXTS = [
    f"{_wide('password')}={SECRET}",
    f"{_wide('password=')}{SECRET}",
    f"pass\u200bword={SECRET}",
    f"api\u00ad_key: {SECRET}",
    f"hf_to\u2060ken={SECRET}",
    f"{_bold('password')}={SECRET}",
    f"token\uff1d{SECRET}",  # a fullwidth equals sign
    f"{_wide('Authorization')}: Token {SECRET}",
    f"connect with {_wide('client_secret')}='{SECRET}' failed",
]
#: Secret field names, spelled so.
NAMES = [_wide("password"), _wide("api_key"), "api\u2060key", "pass\u200dword",
         _bold("secret"), f"{_wide('DB')}_PASSWORD", "x-\ufeffapi-key"]  # fmt: skip


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("where", ["field", "nested", "body", "event"])
def test_a_secret_pair_spelled_in_other_forms_is_redacted(text: str, where: str) -> None:
    """The value of a pair whose name is a secret one as a reader reads it never reaches
    the line (failed before: written as logged); the alert's event stays intact."""

    def call(log: Any) -> None:
        if where == "field":
            log.error("workspace_terminal_failure", detail=text, n=1)
        elif where == "nested":
            log.error("workspace_terminal_failure", detail={"cfg": [text]}, n=1)
        elif where == "body":
            log.error("workspace_terminal_failure", body=text, n=1)
        else:
            log.error(text, n=1)

    (line,) = written(call)
    assert SECRET not in _read(json.dumps(line, ensure_ascii=False))
    if where != "event":
        assert ("workspace_terminal_failure", 1) == (line["event"], line["n"])


@pytest.mark.parametrize("name", NAMES)
def test_a_secret_field_name_spelled_in_other_forms_is_redacted(name: str) -> None:
    """A field, a nested dict key or a bound value under such a name is redacted (failed
    before: ``password`` in fullwidth letters was written with its value)."""

    def call(log: Any) -> None:
        log.error("workspace_terminal_failure", **{name: SECRET})
        log.info("nested", cfg=[{"db": {name: SECRET}}])
        log.bind(**{name: SECRET}).info("bound")

    lines = written(call)
    assert ["workspace_terminal_failure", "nested", "bound"] == [ln["event"] for ln in lines]
    assert SECRET not in _read(json.dumps(lines, ensure_ascii=False))


def test_obs_own_message_quotes_no_such_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused setting's message quotes its value scrubbed, whatever the spelling
    (failed before: a fullwidth ``password=...`` was quoted)."""
    monkeypatch.setenv("OBS_DEDUP_CAPACITY", f"{_wide('password')}={SECRET}")
    with pytest.raises(obs.ConfigError) as info:
        obs.configure(stream="none")
    assert "OBS_DEDUP_CAPACITY" in str(info.value)
    assert SECRET not in _read(str(info.value))


def test_the_otlp_record_carries_no_such_secret() -> None:
    """The same record through a real OTLP receiver: attributes and body scrubbed, the
    alert's event and event_name intact."""
    with OTLPReceiver(grpc=False) as rx:
        obs.configure(
            format="json",
            stream="none",
            otlp_endpoint=rx.http_endpoint,
            logs_exporter="otlp",
            otlp_protocol="http/protobuf",
        )
        try:
            obs.get_logger("app").error(
                "workspace_terminal_failure",
                body=TEXTS[0],
                detail=TEXTS[2],
                **{NAMES[0]: SECRET},
            )
            obs.flush(5)
            records = rx.wait_for(
                1,
                predicate=lambda r: r["attributes"].get("event") == "workspace_terminal_failure",
                timeout=10,
            )
        finally:
            obs.testing.reset()
    assert 1 == len(records)
    assert "workspace_terminal_failure" == records[0]["attributes"]["event"]
    assert SECRET not in _read(json.dumps(records, ensure_ascii=False, default=str))


KEPT = [
    "\u6a21\u578b\u52a0\u8f7d\uff1a\uff4c\uff4c\uff41\uff4d\uff41\uff0d\uff17\uff42\uff0c\uff13s",
    "\uff93\uff83\uff9e\uff99 \uff9b\uff70\uff84\uff9e",
    "na\u00efve caf\u00e9 \ufb01le \u21165",
    "zwj\u200dhere",
]


@pytest.mark.parametrize("text", KEPT)
def test_text_without_a_secret_is_kept_byte_for_byte(text: str) -> None:
    """Non-ASCII text that reads as no secret is written exactly as logged (no folding
    where nothing was redacted)."""
    (line,) = written(lambda log: log.info("e", detail=text, other=f"{text} a=1"))
    assert (text, f"{text} a=1") == (line["detail"], line["other"])


#: Non-ASCII text that folds (fullwidth digits, halfwidth katakana, ligatures, invisible
#: characters) but holds no separator, no letter a name or token needs: never a secret.
_FOLDING = st.text(
    st.sampled_from([*"\u6a21\u578b\u52a0\u8f7d\uff10\uff19\uff93\uff83\uff9e\ufb01\u2116",
                     *"\u3000\u00e9\u00ef", *INVISIBLE]),
    min_size=1,
    max_size=40,
)  # fmt: skip


@given(text=_FOLDING)
@settings(max_examples=60)
def test_any_folding_text_without_a_secret_is_kept(text: str) -> None:
    """Text a reader reads otherwise, with no secret in it, is written exactly as logged
    (the folded reading is only written where it redacted something)."""
    (line,) = written(lambda log: log.info("e", detail=text, pair=f"{text} n=1"))
    assert (text, f"{text} n=1") == (line["detail"], line["pair"])


_SECRET_NAMES = st.sampled_from(["password", "api_key", "hf_token", "client_secret",
                                 "access_token", "Authorization", "cookie",
                                 "db_password"])  # fmt: skip


@st.composite
def _disguised(draw: st.DrawFn, text: str) -> str:
    """``text`` with any of its characters in fullwidth or bold form and invisible
    characters anywhere inside it."""
    out = []
    for c in text:
        form = draw(st.sampled_from(["plain", "wide", "bold"]))
        out.append(_wide(c) if form == "wide" else _bold(c) if form == "bold" else c)
        out.append(draw(st.sampled_from(["", "", *INVISIBLE])))
    return "".join(out)


@given(data=st.data(), name=_SECRET_NAMES, sep=st.sampled_from(["=", ": ", "\uff1d", "\uff1a "]))
@settings(max_examples=60)
def test_any_disguise_of_a_secret_name_is_redacted(
    data: st.DataObject, name: str, sep: str
) -> None:
    """Whatever mix of fullwidth, bold and invisible characters spells the name (and the
    separator), the value is redacted, as a field value and as a field name."""
    shown = data.draw(_disguised(name))

    def call(log: Any) -> None:
        log.warning("pair", detail=f"cfg {shown}{sep}{SECRET} n=1")
        log.warning("named", **{shown: SECRET})

    lines = written(call)
    assert ["pair", "named"] == [ln["event"] for ln in lines]
    assert SECRET not in _read(json.dumps(lines, ensure_ascii=False))


def test_the_plain_fast_path_reads_as_read_too() -> None:
    """Repeated plain calls (the fused fast path once the names are known) redact a secret
    spelled so, a standalone fullwidth token too (failed before: ``hf_...`` in fullwidth
    letters, an identifier, was written as logged on the fast path)."""
    token = "hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
    values = [_wide(token), f"x {_wide(token)}", f"{_wide('password=')}{SECRET}", TEXTS[2]]

    def call(log: Any) -> None:
        for _ in range(2):
            log.info("warm", v="plain")
            for value in values:
                log.info("e", v=value)
            log.info(_wide(f"password={SECRET}"))

    lines = written(call)
    assert 2 * (len(values) + 2) == len(lines)
    text = _read(json.dumps(lines, ensure_ascii=False))
    assert SECRET not in text
    assert token[3:] not in text
    assert 4 == text.count("hf_[REDACTED]")
