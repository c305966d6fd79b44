"""Credentials that stand alone in text, with no name, URL or scheme before them, but are
known by their shape: a vendor's fixed prefix and a long random body (``hf_...`` from
``HF_TOKEN``, ``ghp_...``, ``github_pat_...``, ``xoxb-...``, ``sk-...``, ``sk-ant-...``,
``AKIA...``, a JWT) and a PEM private key's body. Every route obs writes text on redacts
them (the prefix kept); prose and ids that only look alike stay as logged."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver
from obs._secrets import cut_tail, scrub_credentials, scrub_text

ROOT = Path(__file__).resolve().parent.parent
BODY = "Qx7hunter2Qx7abcdefghijklmnopqrstuvwxyz0123"  # what must never come out

#: Each format: the token, its prefix (kept) and the body that must go.
TOKENS: dict[str, tuple[str, str]] = {
    "hf": ("hf_", BODY[:34]),
    "ghp": ("ghp_", BODY[:36]),
    "gho": ("gho_", BODY[:36]),
    "github_pat": ("github_pat_", f"11{BODY}_{BODY}"),
    "xoxb": ("xoxb-", f"123456789012-{BODY[:24]}"),
    "xoxp": ("xoxp-", f"123456789012-{BODY[:24]}"),
    "aws": ("AKIA", "QX7HUNTER2QX7ABC"),
    "aws_session": ("ASIA", "QX7HUNTER2QX7ABC"),
    "openai": ("sk-", f"proj-{BODY}"),
    "anthropic": ("sk-", f"ant-api03-{BODY}-AA"),
    "jwt": ("eyJ", f"hbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{BODY[:20]}.{BODY}"),
}
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA{b}\n{b}\n-----END RSA PRIVATE KEY-----"


def _secret_part(kind: str) -> str:
    """What of a token must not be written (a JWT's first body part is its header)."""
    body = TOKENS[kind][1]
    return body.rsplit(".", 1)[-1] if kind == "jwt" else body


@given(
    kind=st.sampled_from(sorted(TOKENS)),
    before=st.sampled_from(["", "using ", "HF_TOKEN=", "token is ", "(", "'", "\n", "got: "]),
    after=st.sampled_from(["", " ok", "'", ")", ",", "\n", ". retrying"]),
)
@settings(max_examples=120, deadline=None)
def test_a_token_in_any_text_is_redacted_its_prefix_kept(
    kind: str, before: str, after: str
) -> None:
    """The token's body goes wherever it stands in a text; its prefix says what it was;
    the text around it stays; scrubbing twice changes nothing."""
    prefix, body = TOKENS[kind]
    text = f"{before}{prefix}{body}{after}"
    for scrub in (scrub_text, scrub_credentials):
        shown = scrub(text)
        assert _secret_part(kind) not in shown
        assert ("[REDACTED]" if "=" in before else f"{prefix}[REDACTED]") in shown
        assert shown.startswith(before)
        assert shown.endswith(after)
        assert shown == scrub(shown)


def test_a_pem_private_key_body_is_redacted() -> None:
    """A PEM private key in a message keeps its BEGIN and END lines only; cut before its
    END line, the rest of the text is its body and goes too."""
    text = f"loaded key {PEM.format(b=BODY)} from disk"
    assert (
        "loaded key -----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----"
        " from disk"
    ) == scrub_text(text)
    assert "-----BEGIN RSA PRIVATE KEY-----[REDACTED]" == scrub_text(text[11:60])


@given(kind=st.sampled_from(sorted(TOKENS)), keep=st.integers(1, 20))
@settings(max_examples=60, deadline=None)
def test_a_cut_in_a_token_drops_its_head(kind: str, keep: int) -> None:
    """A text cut inside a token (a summary's 600 characters) leaves none of its body: the
    head is too short for the token's shape, so :func:`cut_tail` drops the last token."""
    prefix, body = TOKENS[kind]
    cut = f"the token {prefix}{body}"[: 10 + len(prefix) + keep]
    assert f"{prefix}{body[:keep]}" not in scrub_text(cut_tail(cut))
    assert "the token " == cut_tail(cut)


LOOKALIKES = [
    "password reset requested for user 12",
    "token expired, refreshing",
    "sk-learn-compatible-estimator-wrapper",
    "hf_transfer_enabled_for_downloads_now",
    "ASIAN PACIFIC REGION SERVERS ONLINE",
    "ghp_ is the prefix of a GitHub token",
    "eyJ is how base64 of a JSON object starts",
    "disk-sk-abcdefghijklmnopqrstuvwxyz123 is a volume",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "model meta-llama/Llama-3.1-8B-Instruct loaded in 12.3 s",
]


def test_prose_and_ids_that_look_alike_stay() -> None:
    """Text that holds a prefix but not a token's shape (too short, no digit in an
    ``sk-`` word, inside a longer word, a certificate) is written as logged."""
    assert LOOKALIKES == [scrub_text(x) for x in LOOKALIKES]


def _routes() -> dict[str, Callable[[str], None]]:
    def exc(token: str) -> None:
        error = RuntimeError(f"auth failed for {token}")
        obs.get_logger("app").error("call_failed", exc_info=error)

    return {
        "event": lambda t: obs.get_logger("app").info(f"using {t}"),
        "field": lambda t: obs.get_logger("app").info("loaded", note=f"token {t}"),
        "bare_field": lambda t: obs.get_logger("app").info("loaded", v=t),
        "bare_event": lambda t: obs.get_logger("app").info(t),
        "nested": lambda t: obs.get_logger("app").info("loaded", cfg={"a": [t]}),
        "bound": lambda t: obs.get_logger("app").bind(v=t).info("loaded"),
        "pct_arg": lambda t: obs.get_logger("app").info("loaded %s", t),
        "once": lambda t: obs.get_logger("app").warning_once("loaded", v=t),
        "exception": exc,
        "logger_name": lambda t: obs.get_logger(f"app.{t}").info("loaded"),
        "stdlib": lambda t: logging.getLogger("lib").warning("got %s", t),
        "stdlib_extra": lambda t: logging.getLogger("lib").warning("got", extra={"v": t}),
        "alert": lambda t: obs.get_logger("app").error("workspace_terminal_failure", error=t),
    }


ROUTES = _routes()


@given(route=st.sampled_from(sorted(ROUTES)), kind=st.sampled_from([*sorted(TOKENS), "pem"]))
@settings(max_examples=80, deadline=None)
def test_no_route_writes_a_token(route: str, kind: str) -> None:
    """Every way a caller hands obs text (event, value, bare value, nested, bound, %-arg,
    ``*_once``, exception, logger name, stdlib record): the token's body is not written
    (failed before: every one of them was written as logged)."""
    if kind == "pem":
        token, secret = PEM.format(b=BODY), BODY
    else:
        token, secret = "".join(TOKENS[kind]), _secret_part(kind)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.jsonl"
        try:
            obs.configure(format="json", sdk_disabled=True, file=str(path), stream="none")
            ROUTES[route](token)
            obs.flush(5)
            text = path.read_text(encoding="utf-8")
        finally:
            obs.testing.reset()
    lines = [json.loads(x) for x in text.splitlines()]
    assert lines
    assert secret not in text
    if route == "alert":
        assert [("workspace_terminal_failure", "ERROR")] == [
            (x["event"], x["severity_text"]) for x in lines
        ]


CHILD = """
import logging, sys
import obs
obs.configure()
T = sys.argv[1:]
log = obs.get_logger("vllm.engine")
log.error("workspace_terminal_failure", last_error_message=f"401 for token {T[0]}")
log.warning(f"retrying with {T[1]}", key=T[2])
logging.getLogger("vllm.x").warning("login %s", T[3])
obs.flush(timeout=5)
"""


def test_otlp_and_every_sink_carry_no_token(tmp_path: Path) -> None:
    """stderr, OBS_FILE and a real OTLP receiver (attributes, body, event name): no token;
    the alert's event intact."""
    (tmp_path / "c.py").write_text(textwrap.dedent(CHILD))
    tokens = ["".join(TOKENS[k]) for k in ("hf", "jwt", "aws", "anthropic")]
    with OTLPReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"), OBS_FORMAT="json")
        env.update(OBS_SPOOL_DIR=str(tmp_path / "spool"), OTEL_BLRP_SCHEDULE_DELAY="50")
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint)
        env.update(OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py"), *tokens],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records: list[dict[str, Any]] = rx.wait_for(3, timeout=10)
    for text in (proc.stderr, (tmp_path / "f.jsonl").read_text(), repr(records)):
        assert [] == [s for s in (BODY[:20], "QX7HUNTER2QX7ABC") if s in text]
    (alert,) = [r for r in records if r["event_name"] == "workspace_terminal_failure"]
    assert alert["attributes"]["event"] == "workspace_terminal_failure"
    assert "401 for token hf_[REDACTED]" == alert["attributes"]["last_error_message"]


#: What may stand right before a token in text obs is handed: an escape written as text
#: (JSON's ``\n``/``\t``/``\u0022``, a repr's ``\x1b``, a URL's ``%20``/``%0A``) or a
#: terminal colour (a captured subprocess' output). None is a word the prefix continues.
ESCAPES = st.one_of(
    st.sampled_from(
        ["\\n", "\\t", "\\r", "\\b", "\\f", "\\u0022", "\\u00a0", "\\x1b", "\\U0001f600"]
    ),
    st.sampled_from(["0A", "0a", "20", "22", "2C", "3D", "3d", "09"]).map(lambda h: f"%{h}"),
    st.lists(st.sampled_from("0123456789;"), max_size=16).map(lambda p: f"\x1b[{''.join(p)}m"),
)


@given(
    kind=st.sampled_from(sorted(TOKENS)),
    escape=ESCAPES,
    before=st.sampled_from(["", "x", "line1", "got: "]),
    after=st.sampled_from(["", "\\n", "%20", "\x1b[0m", " ok"]),
    keep=st.integers(1, 20),
)
@settings(max_examples=150, deadline=None)
def test_a_token_after_an_escape_is_redacted(
    kind: str, escape: str, before: str, after: str, keep: int
) -> None:
    """A token right after an escape written as text, or a colour code, is redacted as one
    after a blank is (failed before: ``line1\\nhf_...`` was written as logged, the ``n``
    taken for a word the prefix continues); cut inside it, its head is dropped."""
    prefix, body = TOKENS[kind]
    text = f"{before}{escape}{prefix}{body}{after}"
    for scrub in (scrub_text, scrub_credentials):
        shown = scrub(text)
        assert _secret_part(kind) not in shown
        assert shown == scrub(shown)
    head = f"{before}{escape}"
    cut = f"{head}{prefix}{body}"[: len(head) + len(prefix) + keep]
    assert f"{prefix}{body[:keep]}" not in scrub_text(cut_tail(cut))


def test_a_token_after_an_escape_on_every_route() -> None:
    """A JSON-escaped line break, a percent-encoded blank or a colour before a token, in an
    event, a value and a %-arg: no line carries it (failed before)."""
    token = "".join(TOKENS["hf"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.jsonl"
        try:
            obs.configure(format="json", sdk_disabled=True, file=str(path), stream="none")
            log, event = obs.get_logger("app"), f"got\\n{token}"
            log.info(event)
            log.info("loaded", v=f"line1\\n{token}", w=f"a%20{token}", c=f"\x1b[33m{token}")
            log.info("loaded %s", f"\\u0022{token}\\u0022")
            obs.flush(5)
            text = path.read_text(encoding="utf-8")
        finally:
            obs.testing.reset()
    assert len(text.splitlines()) == 3
    assert BODY[:20] not in text
    assert text.count("hf_[REDACTED]") == 6  # the event and its body, three values, a body
