"""OTLP headers obs cannot send are left out, reported without their text, and never sent.

A header name with a blank, a ``:`` or another character no HTTP header name and no gRPC
metadata key may hold (``x api key``, ``x~y``, ``bad%20key`` decoded) failed every gRPC
export (``Illegal header key``) and every HTTP one (requests refused the request: the
records were lost without a word). The OTel SDK's parser leaves such a header out with a
warning that quotes it whole; obs leaves it out too, names it by position only, and the
SDK's exporters (which read the variables again themselves) send obs' headers only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver
from obs.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
SECRET = "Zq-hdr-S3CRET-value"
ALERT = "workspace_terminal_failure"
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
#: Characters no header name obs sends may hold (``,``, ``=`` and ``%`` change the parse).
_BAD = st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(
    lambda c: (c not in _NAME_CHARS and c not in ",=%" and not c.isspace()) or c in " \t\r\n"
)
_NAMES = st.text(_NAME_CHARS, min_size=1, max_size=8).filter(
    lambda n: not n.lower().startswith("grpc-")
)


@given(good=_NAMES, left=_NAMES, bad=_BAD, right=_NAMES, encode=st.booleans())
def test_a_bad_name_is_left_out_and_not_quoted(
    good: str, left: str, bad: str, right: str, encode: bool
) -> None:
    """``good=1,<left><bad><right>=SECRET``: the good header stays, the bad one is left
    out and named by position only (neither its name nor its value in the reason)."""
    name = left + (quote(bad, safe="") if encode else bad) + right
    settings = load_settings({}, env={"OTEL_EXPORTER_OTLP_HEADERS": f"{good}=1,{name}={SECRET}"})
    headers = settings.otlp_headers
    assert dict(headers) == {good: "1"}
    assert headers.refused == ("header 2 of 2: its name is not a header name",)  # type: ignore[attr-defined]
    assert SECRET not in repr(settings)


@given(
    name=_NAMES,
    value=st.text(
        st.characters(codec="ascii", min_codepoint=0x21, max_codepoint=0x7E), max_size=12
    ).map(lambda v: v.replace(",", "").replace("%", "").strip()),
)
def test_a_valid_header_is_kept_as_is(name: str, value: str) -> None:
    """A header name of letters, digits, ``-``, ``_``, ``.`` with a visible ASCII value."""
    headers = load_settings({}, env={"OTEL_EXPORTER_OTLP_HEADERS": f"{name}={value}"}).otlp_headers
    assert dict(headers) == {name: value}
    assert headers.refused == ()  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["caf\u00e9", "a\x01b", "%20lead", "a%0D%0AX-Injected: 1"])
def test_a_value_no_transport_carries_is_left_out(value: str) -> None:
    """A value gRPC (visible ASCII only) or requests (no leading blank) refuses."""
    headers = load_settings({}, env={"OTEL_EXPORTER_OTLP_HEADERS": f"x-v={value}"}).otlp_headers
    assert dict(headers) == {}
    assert headers.refused == ("header 1 of 1: its value is not visible ASCII",)  # type: ignore[attr-defined]


def test_keyword_headers_too(tmp_path: Path) -> None:
    """``configure(otlp_headers={...})``: the same rule, reported once at WARNING without
    the header's text; configure does not raise."""
    out = tmp_path / "f.jsonl"
    try:
        obs.configure(stream="none", file=str(out), otlp_headers={"x ok": SECRET, "x-fine": "1"})
        obs.flush()
    finally:
        obs.testing.reset()
    events = [json.loads(line) for line in out.read_text().splitlines()]
    (report,) = [e for e in events if e["event"] == "obs_internal_error"]
    assert report["severity_text"] == "WARNING"
    assert report["variable"] == "otlp_headers"
    assert "header 1 of 2" in report["error_message"]
    assert SECRET not in repr(events)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize(
    "headers", ["x api key={s}", "bad%20key={s}", "x~y={s}", "x-scope-orgid=a,x token={s}"]
)
def test_export_goes_on_without_the_header(tmp_path: Path, protocol: str, headers: str) -> None:
    """End to end, each protocol: the alert arrives at a real receiver (it failed on every
    gRPC export, and was lost over HTTP for a name the SDK decoded into a bad one); the
    left-out header is reported and its value is nowhere in the output."""
    child = f"""
    import obs
    obs.configure()
    obs.get_logger("comm").error({ALERT!r}, stage="terminal_failure", chain="fi_ar")
    obs.flush(timeout=10)
    """
    with OTLPReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        endpoint = rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint
        env.update(
            PYTHONPATH=str(ROOT), OTEL_BLRP_SCHEDULE_DELAY="50",
            OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_HEADERS=headers.format(s=SECRET),
            OBS_SPOOL_DIR=str(tmp_path / "spool"),
        )  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(child)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        rx.wait_for(predicate=lambda r: r["attributes"].get("event") == ALERT, timeout=30)
    assert "left out (not sent), read from OTEL_EXPORTER_OTLP_HEADERS" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
