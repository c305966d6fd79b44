"""What obs' and comm's command-line tools print never quotes a credential.

``python -m obs receive`` prints (and saves) what a sender sent; ``python -m comm probe``
echoes its arguments (``--log-dir``) in its text and ``--json`` output; ``python -m obs
spool`` names its directory; argparse's usage errors quote the refused value. Each is
run here as the operator runs it (a real subprocess, real OTLP senders), and its output is
searched for the secrets it was given.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from obs._cli_text import scrub_tree

ROOT = Path(__file__).resolve().parents[1]
SECRET = "hunter2-S3CRET"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _emit(
    url: str,
    *,
    body: Any,
    attributes: dict[str, Any],
    resource: dict[str, Any],
    event_name: str | None = "mem",
) -> None:
    """One record through the real SDK and HTTP exporter."""
    provider = LoggerProvider(resource=Resource.create(resource))
    provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(url, timeout=10)))
    provider.get_logger("t").emit(body=body, attributes=attributes, event_name=event_name)
    provider.shutdown()


def _receive(tmp_path: Path, send: list[dict[str, Any]]) -> tuple[str, str]:
    """Run ``python -m obs receive --out``, send ``send``'s records, stop it; (stdout with
    the saved file appended, stderr)."""
    out = tmp_path / "records.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "obs", "receive", "--http-only", "--port", "0",
         "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        url = banner.split()[-4]
        assert url.endswith("/v1/logs"), banner
        for kwargs in send:
            _emit(url, **kwargs)
        lines = [proc.stdout.readline() for _ in send]
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    return "".join(lines) + rest + out.read_text(), err


class TestReceive:
    def test_printed_and_saved_records_are_scrubbed(self, tmp_path: Path) -> None:
        """A credential in a body, an attribute (secret-named or a URL's password, at any
        depth), a resource attribute or an event name is neither printed nor saved; each
        record stays one line."""
        sent = [
            {
                "body": f"login with password={SECRET} failed",
                "attributes": {
                    "event": f"mem token={SECRET}",
                    "api_key": SECRET,
                    "url": f"https://user:{SECRET}@db.example/x",
                    "nested": {"inner": {"authorization": f"Bearer {SECRET}"}},
                    "argv": ["--hf-token", SECRET],
                    "note": f"line one\nAuthorization: Bearer {SECRET}",
                    "blob": f"password={SECRET}".encode(),
                },
                "resource": {"service.name": f"svc password={SECRET}", "db_password": SECRET},
            },
            {
                "body": {"headers": {"x": SECRET}, "msg": f"secret={SECRET}"},
                "attributes": {"cookie": SECRET, "event": f"mem token={SECRET}"},
                "resource": {"service.name": "svc"},
                "event_name": None,
            },
        ]
        text, err = _receive(tmp_path, sent)
        for leak in (SECRET, base64.b64encode(f"password={SECRET}".encode()).decode()):
            assert leak not in text
            assert leak not in err
        assert "received 2 records" in text
        printed = text.split("received 2 records")[0].splitlines()
        assert len(printed) == 2, printed  # a line break in a value stays escaped
        saved = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
        assert saved[0]["attributes"]["api_key"] == "[REDACTED]"
        assert saved[0]["resource"]["service.name"] == "svc password=[REDACTED]"
        assert "mem token=[REDACTED]" in text.split("received 2 records")[1]
        assert saved[0]["attributes"]["url"] == "https://user:[REDACTED]@db.example/x"


_NAMES = st.sampled_from(["api_key", "password", "Authorization", "hf_token", "db.password"])
_PLAIN = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def _secret_shapes(draw: st.DrawFn) -> Any:
    """A JSON-like value holding SECRET in one of the shapes obs' walk redacts."""
    name = draw(_NAMES)
    shape = draw(st.sampled_from(["key", "pair", "url", "bearer", "option", "named", "tuple"]))
    return {
        "key": {name: SECRET},
        "pair": f"{draw(_PLAIN)} {name}={SECRET}",
        "url": f"https://u:{SECRET}@h.example/p",
        "bearer": f"Authorization: Bearer {SECRET}",
        "option": ["--" + name.replace("_", "-"), SECRET],
        "named": {"name": name.upper(), "value": SECRET},
        "tuple": [name, SECRET],
    }[shape]


_TREES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _PLAIN, _secret_shapes()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_PLAIN, inner, max_size=4)
    ),
    max_leaves=12,
)


@given(tree=_TREES)
def test_scrub_tree_leaves_no_secret_and_stays_json(tree: Any) -> None:
    """Whatever the document's shape, its scrubbed copy is JSON without the secret, and a
    document without one keeps its shape (every dict's size, every list's length)."""
    out = scrub_tree(tree)
    text = json.dumps(out)
    assert SECRET not in text

    def shape(value: Any) -> Any:
        if isinstance(value, dict):
            return len(value), [shape(v) for v in value.values()]
        if isinstance(value, list):
            return [shape(v) for v in value]
        return None

    if SECRET not in json.dumps(tree):
        assert shape(out) == shape(tree)
