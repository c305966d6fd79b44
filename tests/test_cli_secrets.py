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

import pytest
from _children import traced_parent
from _spooled import spooled_doc
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from obs._spool import Spool
from obs.cli_text import scrub_tree

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


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=300, check=False,
        env=env or ENV, cwd=ROOT,
    )  # fmt: skip


class TestProbe:
    @pytest.mark.parametrize(
        ("shape", "as_json"),
        [("token={}", True), ("password={}", False), ("https:/u:{}@h", True),
         ("token={}\nexit 0: every rank initialized", False)],
    )  # fmt: skip
    def test_log_dir_is_not_echoed_with_its_secret(
        self, tmp_path: Path, shape: str, as_json: bool
    ) -> None:
        """A --log-dir holding a credential: the run works (its logs are there), and
        neither the JSON document nor the text report nor stderr quotes the credential;
        the JSON is still one parseable document, the report one line per item (a line
        break in the path forged an ``exit 0`` line)."""
        log_dir = tmp_path / shape.format(SECRET) / "run"
        proc = _run("-m", "comm", "probe", "--world-size", "1", "--embedded-receiver",
                    "--log-dir", str(log_dir), *(["--json"] if as_json else []),
                    env=traced_parent(ENV))  # fmt: skip
        assert proc.returncode in (0, 3), proc.stderr
        assert (log_dir / "rank-0.log").exists()
        assert SECRET not in proc.stdout
        assert SECRET not in proc.stderr
        if as_json:
            doc = json.loads(proc.stdout)
            assert doc["exit_code"] == proc.returncode
            assert "[REDACTED]" in doc["spec"]["log_dir"]
        else:  # one line per item: a line break in the path is escaped, never a line
            assert "rank logs: " in proc.stdout
            assert [proc.returncode] == [
                int(line.split()[1].rstrip(":"))
                for line in proc.stdout.splitlines()
                if line.startswith("exit ")
            ], proc.stdout


#: Usage errors: argparse (and the tools' own checks) quote the refused value.
USAGE = [
    ("-m", "obs", "receive", "--port", f"token={SECRET}"),
    ("-m", "obs", "receive", "--hf-token", SECRET),
    ("-m", "obs", "spool", "list", "--timeout", f"password={SECRET}"),
    ("-m", "obs", "spool", f"api_key={SECRET}"),
    ("-m", "obs", "schema", "--format", f"token={SECRET}"),
    ("-m", "obs", f"token={SECRET}"),
    ("-m", "comm", f"token={SECRET}"),
    ("-m", "comm", "probe", "--world-size", "1", "--dtype", f"token={SECRET}"),
    ("-m", "comm", "probe", "--world-size", "1", "--api-key", SECRET),
    ("-m", "comm", "probe", "--world-size", "1", "--otlp-endpoint", f"https://u:{SECRET}@h:x"),
]


@pytest.mark.parametrize("argv", USAGE, ids=lambda a: " ".join(a[1:3]))
def test_usage_errors_quote_no_secret(argv: tuple[str, ...]) -> None:
    """A refused argument: exit 2 and a usage error that does not quote the credential."""
    proc = _run(*argv)
    assert proc.returncode == 2, proc.stderr
    assert "usage" in proc.stderr.lower() or "not valid" in proc.stderr, proc.stderr
    assert SECRET not in proc.stderr + proc.stdout


def test_probe_log_dir_refused_quotes_no_secret(tmp_path: Path) -> None:
    """A --log-dir under a file (refused before any rank starts) and a backend variable
    with a credential: the usage error names no secret."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = _run("-m", "comm", "probe", "--world-size", "1",
                "--log-dir", str(blocker / f"token={SECRET}"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--log-dir" in proc.stderr
    env = {**ENV, "COMM_FI_AR_BACKEND": f"password={SECRET}"}
    proc2 = _run("-m", "comm", "probe", "--world-size", "1", env=env)
    assert proc2.returncode == 2, proc2.stderr
    assert SECRET not in proc.stderr + proc2.stderr


def test_spool_names_its_directory_without_the_secret(tmp_path: Path) -> None:
    """``spool list`` and ``purge`` print the directory they read, and ``list`` each
    spooled record's service.name (another obs, another version may have written it):
    scrubbed, one line each."""
    directory = tmp_path / f"token={SECRET}"
    Spool(str(directory), 1 << 20).append(
        [spooled_doc(0, f"svc password={SECRET}"), spooled_doc(1, "svc\nforged: 9 records")]
    )
    for action in ("list", "purge"):
        proc = _run("-m", "obs", "spool", action, "--dir", str(directory))
        assert proc.returncode == 0, proc.stderr
        assert "token=[REDACTED]" in proc.stdout
        assert SECRET not in proc.stdout + proc.stderr
        if action == "list":
            assert "svc password=[REDACTED]: 1 records" in proc.stdout
            assert "  svc\\nforged: 9 records: 1 records" in proc.stdout


@pytest.mark.parametrize("where", ["missing/token={}/x.jsonl", "file/password={}"])
def test_receive_out_that_cannot_be_opened(tmp_path: Path, where: str) -> None:
    """An --out that cannot be opened: one scrubbed line and exit 1, not a traceback
    quoting the path."""
    (tmp_path / "file").write_text("")
    out = tmp_path / where.format(SECRET)
    proc = _run("-m", "obs", "receive", "--http-only", "--port", "0", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("python -m obs receive: cannot open --out "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert SECRET not in proc.stderr + proc.stdout


def test_receiver_timeout_message_quotes_no_secret() -> None:
    """``OTLPReceiver.wait_for``'s TimeoutError lists the events seen (it lands in a CI
    log when a test fails): their names scrubbed."""
    from obs._receiver import OTLPReceiver

    with OTLPReceiver(grpc=False) as rx:
        _emit(rx.http_logs_url, body="b", attributes={}, resource={},
              event_name=f"login token={SECRET}")  # fmt: skip
        rx.wait_for(1, timeout=30)
        with pytest.raises(TimeoutError) as info:
            rx.wait_for(predicate=lambda r: False, timeout=0.1)
    assert "token=[REDACTED]" in str(info.value)
    assert SECRET not in str(info.value)


def test_receive_stops_quietly_when_its_reader_leaves(tmp_path: Path) -> None:
    """``python -m obs receive | head -1``: the reader closes the pipe; the next record
    ends the receiver with status 0 and no traceback on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "obs", "receive", "--http-only", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-4]
        proc.stdout.close()  # as head does after its line
        _emit(url, body="b", attributes={}, resource={})  # its line meets the closed pipe
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
