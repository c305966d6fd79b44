"""A secret word spelled with the separators and case the key normaliser ignores
(``pass_word``, ``Pass-Phrase``, ``A_P_I_KEY``) names a secret as its plain spelling does:
one normaliser, so ``passWord`` and ``pass_word`` are one name. As a field, a dict key, a
bound name, a dataclass field and a pair in text; the JSON line and OTLP are checked."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._secrets import SECRET_PAIRS, SECRET_WORDS, is_secret_name, pair_hint

SECRET = "Qx7hunter2Qx7"
WHERE = ["field", "dict_key", "bound", "text", "pairs"]


def _line(key: str, where: str) -> str:
    """The OBS_FILE text of one ERROR record carrying ``SECRET`` under ``key``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="stdout")
        try:
            log: Any = obs.get_logger("app")
            if where == "field":
                log.error("workspace_terminal_failure", **{key: SECRET})
            elif where == "dict_key":
                log.error("workspace_terminal_failure", cfg={"nested": {key: SECRET}})
            elif where == "bound":
                log.bind(**{key: SECRET}).error("workspace_terminal_failure")
            elif where == "text":
                msg = "retrying with " + key + "=" + SECRET
                log.error("workspace_terminal_failure", msg=msg)
            else:
                log.error("workspace_terminal_failure", cfg=[(key, SECRET)])
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        finally:
            obs.testing.reset()


@pytest.mark.parametrize(
    "key",
    ["pass_word", "Pass-Word", "PASS_WORD", "pass_phrase", "passPhrase", "keyPassPhrase",
     "pass_wd", "A_P_I_KEY", "auth_orization", "db.pass.word"],
)  # fmt: skip
@pytest.mark.parametrize("where", WHERE)
def test_a_secret_word_split_by_separators(key: str, where: str) -> None:
    """``pass_word=S`` was written as logged while ``passWord`` was redacted."""
    text = _line(key, where)
    assert SECRET not in text
    assert json.loads(text)["event"] == "workspace_terminal_failure"


def _spellings(word: str, cuts: set[int], sep: str, upper: bool) -> str:
    """``word`` cut at ``cuts`` (positions inside it) with ``sep`` between the pieces."""
    pieces, last = [], 0
    for cut in sorted(c for c in cuts if 0 < c < len(word)):
        pieces.append(word[last:cut])
        last = cut
    pieces.append(word[last:])
    if sep == "camel":
        return pieces[0] + "".join(p.capitalize() for p in pieces[1:])
    name = sep.join(pieces)
    return name.upper() if upper else name


@given(
    word=st.sampled_from(sorted(w for w in SECRET_WORDS if len(w) >= 4)),
    cuts=st.sets(st.integers(1, 15), min_size=1, max_size=3),
    sep=st.sampled_from(["_", "-", ".", " ", "__", "camel"]),
    upper=st.booleans(),
    prefix=st.sampled_from(["", "db_", "HF_", "my-"]),
    where=st.sampled_from(WHERE),
)
@settings(max_examples=150, deadline=None)
def test_any_spelling_of_a_secret_word(  # noqa: PLR0917 - Hypothesis' arguments
    word: str, cuts: set[int], sep: str, upper: bool, prefix: str, where: str
) -> None:
    """Every secret word, cut anywhere with any separator the normaliser ignores (or into
    camelCase), upper or lower case, after another word: its value is never written."""
    key = prefix + _spellings(word, cuts, sep, upper)
    assert is_secret_name(key)
    if where == "text" and (sep == " " or not pair_hint(f"{key}=")):
        return  # prose (``pass word=S``: the pair's name is ``word``), or a text with no
        # piece of a secret word (``se_cret=S``): the hot path's prefilter passes it over
    text = _line(key, where)
    assert SECRET not in text


@pytest.mark.parametrize(
    "key", ["num_tokens", "max_token_num", "token_count", "keyboard", "passed", "past_key",
            "cache_key", "dedup_key", "sort_key", "bypass_count", "compass_word", "session"],
)  # fmt: skip
def test_names_near_a_secret_word_stay(key: str) -> None:
    """Names that only hold pieces of a secret word keep their values."""
    assert not is_secret_name(key)
    assert json.loads(_line(key, "field"))[key] == SECRET


@pytest.mark.parametrize(
    "key",
    ["creds", "db_creds", "aws_cred", "passcode", "AccountKey", "account_key", "master_key",
     "hmac_key", "auth_key", "deploy_key", "storage_key", "subscription-key",
     "Ocp-Apim-Subscription-Key", "SharedKey", "license_key"],
)  # fmt: skip
@pytest.mark.parametrize("where", WHERE)
def test_common_secret_names(key: str, where: str) -> None:
    """Names of credentials in common use (an Azure connection string's ``AccountKey``,
    ``creds``, a ``passcode``, a ``master_key``) were written as logged."""
    text = _line(key, where)
    assert SECRET not in text


def test_an_azure_connection_string() -> None:
    """``AccountKey=S`` inside a connection string: the key goes, the rest stays."""
    conn = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET};Suffix=x"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="stdout")
        try:
            obs.get_logger("app").warning("connect", conn=conn)
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                shown = json.loads(fh.read())["conn"]
        finally:
            obs.testing.reset()
    assert SECRET not in shown
    assert "AccountName=acct" in shown


@given(
    pair=st.sampled_from(sorted(SECRET_PAIRS)),
    style=st.sampled_from(["{a}_{b}", "{A}{B}", "{a}{B}", "{A}-{B}", "{a}{b}", "{u}_{v}"]),
    prefix=st.sampled_from(["", "x_", "azure-", "MY_"]),
    where=st.sampled_from(WHERE),
)
@settings(max_examples=120, deadline=None)
def test_any_spelling_of_a_secret_pair(
    pair: tuple[str, str], style: str, prefix: str, where: str
) -> None:
    """Every two-word secret name (``AccountKey``, ``master-key``, ``HMAC_KEY``), in any
    case and separator, after another word: its value is never written."""
    a, b = pair
    key = prefix + style.format(
        a=a, b=b, A=a.capitalize(), B=b.capitalize(), u=a.upper(), v=b.upper()
    )
    assert is_secret_name(key)
    assert SECRET not in _line(key, where)
