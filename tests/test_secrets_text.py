"""Secrets in text obs writes: a secret-named pair hidden inside another pair's value, on
every route (JSON lines, OBS_FILE, OTLP over a real receiver, the spool)."""

from __future__ import annotations

import collections
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from obs._receiver import OTLPReceiver
from obs.encode import scrub_text, to_jsonable, to_otel_value

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Zq9hunter2Zq9"

#: Secret-looking names as they are spelled in text (query strings, CLI flags, reprs).
SECRET_NAMES = ["password", "api_key", "apiKey", "X-Api-Key", "hf_token", "--hf-token",
                "client_secret", "access_token", "db_password", "2fa_token", "privateKey",
                "session_cookie", "token", "DB_PASSWORD"]  # fmt: skip
#: A non-secret pair whose value a secret pair hides in.
OUTER_NAMES = ["ValueError", "error", "config", "cfg", "url", "http", "https", "details",
               "x", "note", "args", "Caused by", "reason"]  # fmt: skip
OUTER_SEPS = ["=", ": ", ":", " = ", "=(", ": [", "='", '="']
#: How the secret pair reads inside that value: dict repr, JSON, query, kwargs, tuple pair.
INNER = ["{{'{k}': '{v}'}}", '{{"{k}": "{v}"}}', "/v1/logs?{k}={v}&x=1", "{k}={v}",
         "M({k}='{v}', n=1)", "[('{k}', '{v}')]", "{k}: {v}", "//h:1/?a=1&{k}={v}"]  # fmt: skip


class TestNestedPairs:
    @pytest.mark.parametrize(
        "text",
        [
            f"ValueError: {{'password': '{SECRET}'}}",
            f"bad config: {{'api_key': '{SECRET}'}}",
            f"M(hf='x', cfg={{'token': '{SECRET}'}})",
            f"OTLP export to http://h:4318/v1/logs?api_key={SECRET}&x=1 failed",
            f"Max retries exceeded with url: /v1/logs?token={SECRET} (Caused by ...)",
            f"error: password={SECRET}",
            f"dict_items([('password', '{SECRET}')])",
            f"argv: --model m --hf-token={SECRET} --port 1",
            f"2fa_token={SECRET}",
            "a" * 300 + f"_password={SECRET}",
        ],
    )
    def test_secret_pair_inside_another_value(self, text: str) -> None:
        """A pair whose name is not secret no longer swallows the secret pair in its value
        (``error: password=x`` read as name ``error``, value ``password=x``: kept)."""
        out = scrub_text(text)
        assert SECRET not in out
        assert "[REDACTED]" in out
        assert out == scrub_text(out)

    @settings(max_examples=300, deadline=None)
    @given(
        outer=st.sampled_from(OUTER_NAMES),
        sep=st.sampled_from(OUTER_SEPS),
        inner=st.sampled_from(INNER),
        key=st.sampled_from(SECRET_NAMES),
        value=st.text("abcdefXYZ0123456789_-./+", min_size=1, max_size=12),
        prefix=st.sampled_from(["", "failed: ", "x ", "("]),
    )
    def test_any_nesting(  # noqa: PLR0917 - Hypothesis passes each drawn part
        self, outer: str, sep: str, inner: str, key: str, value: str, prefix: str
    ) -> None:
        """Whatever pair, URL or repr a secret pair sits in, its value is not written."""
        secret = f"Qz{value}Qz"
        text = prefix + outer + sep + inner.format(k=key, v=secret)
        out = scrub_text(text)
        assert secret not in out, (text, out)
        assert out == scrub_text(out)

    def test_plain_pairs_stay(self) -> None:
        """Pairs with ordinary names are left as they are."""
        text = "url=http://h:4318/v1/logs?x=1 cfg={'n': 2, 'model': 'm'} backend: mnnvl"
        assert text == scrub_text(text)


CHILD = """
import sys
import obs
obs.configure()
log = obs.get_logger("app")
S = sys.argv[1]
cfg = {"api_key": S, "model": "m"}
try:
    raise RuntimeError(f"bad config: {cfg}")
except RuntimeError as exc:
    log.exception("workspace_terminal_failure", err=exc)
log.warning("loaded %s", f"url: /v1/logs?token={S}")
obs.flush(timeout=5)
"""


def _run_child(
    tmp_path: Path, env: dict[str, str], source: str = CHILD
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` with the secret as its argument, JSON lines to stderr and OBS_FILE."""
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(source))
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    full.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"), OBS_FORMAT="json")
    full.update(OBS_SPOOL_DIR=str(tmp_path / "spool"), OTEL_BLRP_SCHEDULE_DELAY="50", **env)
    return subprocess.run(
        [sys.executable, str(script), SECRET],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_nested_pairs_on_every_route(tmp_path: Path, protocol: str) -> None:
    """Exception text, an exception field and a formatted body,
    each with a secret pair inside another pair: not on stderr, in OBS_FILE nor in what a
    real OTLP receiver got; the alert's event arrives intact on each route."""
    with OTLPReceiver() as rx:
        grpc = protocol == "grpc"
        proc = _run_child(
            tmp_path,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint if grpc else rx.http_endpoint,
             "OTEL_EXPORTER_OTLP_PROTOCOL": protocol},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        rx.wait_for(predicate=lambda r: r["attributes"].get("event") == "loaded %s", timeout=10)
        records = rx.records
    lines = [json.loads(x) for x in proc.stderr.splitlines()]
    written = (tmp_path / "f.jsonl").read_text()
    assert SECRET not in proc.stderr
    assert SECRET not in written
    assert SECRET not in repr(records)
    assert {"workspace_terminal_failure", "loaded %s"} <= {line["event"] for line in lines}
    alert = [r for r in records if r["attributes"].get("event") == "workspace_terminal_failure"]
    assert alert
    assert alert[0]["event_name"] == "workspace_terminal_failure"


def test_query_token_of_endpoint_not_written(tmp_path: Path) -> None:
    """An endpoint whose query holds a token (a SaaS collector's ``?api_key=``): obs' own
    export-failure report, the SDK's retry warnings and the spool never show it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run_child(
        tmp_path,
        {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"http://127.0.0.1:{port}/v1/logs?api_key={SECRET}&x=1",
         "OTEL_EXPORTER_OTLP_TIMEOUT": "0.5", "OBS_SHUTDOWN_TIMEOUT": "2"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stderr.splitlines()]
    assert "obs_internal_error" in {line["event"] for line in lines}
    assert SECRET not in proc.stderr
    assert SECRET not in (tmp_path / "f.jsonl").read_text()
    spooled = list((tmp_path / "spool").iterdir())
    assert spooled
    for path in spooled:
        assert SECRET.encode() not in path.read_bytes(), path.name


FALLBACK_CHILD = """
import sys
import obs
from obs.events import ChainTerminalFailure, emit
from obs.fallback import FallbackRunner, Stage
obs.configure()
S = sys.argv[1]
def pair():
    raise RuntimeError(f"store connect failed: password={S}")
def straddling():  # a URL password across the 2,000-character cut
    raise RuntimeError("x" * 1980 + f" http://user:{S}{S}@h/")
def mapping():
    raise KeyError({"api_key": S})
result = FallbackRunner("c").run((Stage("a", pair), Stage("b", straddling), Stage("m", mapping)))
assert S not in result.describe(), result.describe()
emit(ChainTerminalFailure("d", ("a",), ("error",), "RuntimeError", f"token={S}",
                          f"retry with --hf-token={S}"))
obs.flush(timeout=5)
"""


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_fallback_and_typed_event_text(tmp_path: Path, protocol: str) -> None:
    """A fallback chain's error messages (each attempt's, the terminal failure's, the
    bodies built from them, ``describe()``) and a typed event's text fields are scrubbed
    as exception text is: before the cut, of secret pairs too. JSON, OBS_FILE, OTLP."""
    with OTLPReceiver() as rx:
        grpc = protocol == "grpc"
        endpoint = rx.grpc_endpoint if grpc else rx.http_endpoint
        proc = _run_child(
            tmp_path,
            {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
            FALLBACK_CHILD,
        )
        assert proc.returncode == 0, proc.stderr
        rx.wait_for(2, predicate=lambda r: r["event_name"] == "chain_terminal_failure")
        records = rx.records
    lines = [json.loads(x) for x in proc.stderr.splitlines()]
    events = [line["event"] for line in lines]
    assert events.count("chain_attempt_failed") == 3
    assert events.count("chain_terminal_failure") == 2
    for text in (proc.stderr, (tmp_path / "f.jsonl").read_text(), repr(records)):
        assert SECRET not in text
        assert SECRET[:7] not in text  # no half of one either


class _Header(NamedTuple):
    name: str
    value: str


#: Containers that carry (name, value) pairs: header lists, gRPC metadata, dict views.
PAIR_SHAPES: list[Callable[[str, str], object]] = [
    lambda k, v: [(k, v)],
    lambda k, v: ((k, v), ("x-other", "1")),
    lambda k, v: (k, v),
    lambda k, v: [[k, v]],
    lambda k, v: {k: v}.items(),
    lambda k, v: collections.deque([(k, v)]),
    lambda k, v: {"metadata": ((k, v),)},
    lambda k, v: [_Header(k, v)],
    lambda k, v: [{"name": k, "value": v}],
    lambda k, v: {"Key": k, "Value": v},
]


class TestPairsInValues:
    @settings(max_examples=200, deadline=None)
    @given(
        key=st.sampled_from(["Authorization", "x-api-key", "X-Api-Key", "cookie", "password",
                             "hf_token", "apiKey", "Proxy-Authorization", "client_secret"]),
        shape=st.sampled_from(PAIR_SHAPES),
        otel=st.booleans(),
    )  # fmt: skip
    def test_pair_value_redacted(
        self, key: str, shape: Callable[[str, str], object], otel: bool
    ) -> None:
        """A (name, value) pair under a secret-looking name, in any container (a header
        list, gRPC metadata, a dict's items view, a deque, a Kubernetes env entry): its
        value is not written on either route, and its name is."""
        walked = (to_otel_value if otel else to_jsonable)(shape(key, SECRET))
        text = json.dumps(walked)
        assert SECRET not in text
        assert key in text

    def test_plain_pairs_stay(self) -> None:
        """Pairs with ordinary names keep their values."""
        assert [["content-type", "json"]] == to_jsonable([("content-type", "json")])
        assert [{"name": "MODEL", "value": "m"}] == to_jsonable([{"name": "MODEL", "value": "m"}])
        assert ["a", "b"] == to_jsonable(["a", "b"])


def test_header_pairs_on_every_route(tmp_path: Path) -> None:
    """A logged header list and a dict's items view: redacted in the JSON line, OBS_FILE
    and what a real OTLP receiver got; the alert keeps its event."""
    child = """
    import collections, sys
    import obs
    obs.configure()
    S = sys.argv[1]
    obs.get_logger("app").error("workspace_terminal_failure",
        sent=[("Authorization", f"Token {S}"), ("x-api-key", S)],
        metadata=(("cookie", S),), env={"HF_TOKEN": S}.items(),
        q=collections.deque([("password", S)]))
    obs.flush(timeout=5)
    """
    with OTLPReceiver() as rx:
        (tmp_path / "c.py").write_text(textwrap.dedent(child))
        full = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        full.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"), OBS_FORMAT="json")
        full.update(OTEL_BLRP_SCHEDULE_DELAY="50", OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint)
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py"), SECRET],
            cwd=tmp_path, env=full, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (record,) = rx.wait_for(predicate=lambda r: r["event_name"] == "workspace_terminal_failure")
    (line,) = [json.loads(x) for x in proc.stderr.splitlines()]
    assert line["event"] == record["attributes"]["event"] == "workspace_terminal_failure"
    for text in (proc.stderr, (tmp_path / "f.jsonl").read_text(), repr(record)):
        assert SECRET not in text
    assert line["sent"][1] == ["x-api-key", "[REDACTED]"]


class _Config:
    """A message object whose text carries a secret pair."""

    def __str__(self) -> str:
        return f"loaded config: token={SECRET}"


@pytest.mark.parametrize(
    "msg",
    [{"password": SECRET}, {"db": {"api_key": SECRET}}, [("x-api-key", SECRET)], _Config()],
    ids=["dict", "nested", "pairs", "object"],
)
def test_stdlib_message_not_a_str(
    msg: object, configure_json: Callable[..., Callable[[], list[dict[str, Any]]]]
) -> None:
    """A stdlib record whose msg is not a str (a dict, an object) and has no args: its
    body is that object's text, scrubbed as obs' own text is (its event is a repr)."""
    read = configure_json()
    logging.getLogger("lib").warning(msg)
    (line,) = read()
    assert SECRET not in json.dumps(line)
    assert "[REDACTED]" in line["body"]


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"]
)
@pytest.mark.parametrize(
    "headers",
    ["authorization=Bearer {s},x tenant=team", "x api key={s}", "x-scope-orgid=a,x token={s}"],
)
def test_headers_the_sdk_refuses_are_not_quoted(
    tmp_path: Path, variable: str, headers: str
) -> None:
    """The SDK's HTTP exporter parses the headers variable again, whatever obs passes it,
    and warns with each header it refuses (``x tenant=team``, a name with a blank) quoted
    whole: a header's value is a secret, so the warning goes out without it (it went to
    stderr as ``...occurrences: x api key=<token>`` before)."""
    with OTLPReceiver() as rx:
        proc = _run_child(
            tmp_path,
            {variable: headers.format(s=SECRET), "OTEL_EXPORTER_OTLP_ENDPOINT": rx.http_endpoint,
             "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = rx.records  # what arrived (a header name with a blank fails the request)
    assert "Header format invalid" in proc.stderr  # the SDK's warning is still shown
    assert SECRET not in proc.stderr
    assert SECRET not in (tmp_path / "f.jsonl").read_text()
    assert SECRET not in repr(records)


@given(
    first=st.sampled_from(["basic", "BASIC", "Basic", "bearer", "Bearer"]),
    blanks=st.sampled_from([" ", "  ", "\t", "\n"]),
    second=st.sampled_from(["Bearer", "bearer", "Basic", "BASIC"]),
    before=st.sampled_from(["", "sent: ", "x "]),
)
@settings(max_examples=80, deadline=None)
def test_a_scheme_word_before_a_scheme(first: str, blanks: str, second: str, before: str) -> None:
    """``BASIC  Bearer S`` (a word that is a scheme's name, then the credential's own
    scheme): the first took the second for its credential and left S as it was (found by
    test_hardening's credential_anywhere). A scheme's name is never its credential."""
    text = f"{before}{first}{blanks}{second} {SECRET} tail"
    out = scrub_text(text)
    assert SECRET not in out
    assert out.endswith(" tail")


#: What may sit inside a quoted name before its closing quote: blanks, JSON-escaped blanks
#: (``"api_key\\n": x`` in a dumped text), a mix.
INSIDE_QUOTES = [" ", "  ", "\t", "\\n", "\\t", "\\r\\n", " \\n", "\\n ", "\n", "\r\n"]
#: A quoted name's pair: JSON, a dict repr, a header tuple, blanks before ``:``, a Ruby
#: hash, JSON escaped again.
QUOTED_SHAPES = ['{{"{k}": "{v}"}}', "{{'{k}': '{v}'}}", "[('{k}', '{v}')]", "{{'{k}' : '{v}'}}",
                 '"{k}"={v}', "'{k}' => '{v}'", '{{\\"{k}\\": \\"{v}\\"}}']  # fmt: skip


@given(
    name=st.sampled_from(SECRET_NAMES),
    inside=st.sampled_from(INSIDE_QUOTES),
    shape=st.sampled_from(QUOTED_SHAPES),
    outer=st.sampled_from(["{t}", "error: {t}", "config={t} n=1", "ValueError({t})"]),
)
@settings(max_examples=150, deadline=None)
def test_blanks_inside_a_quoted_name(name: str, inside: str, shape: str, outer: str) -> None:
    """A quoted name with blanks or escaped line breaks before its closing quote
    (``{"api_key\\n": "S"}``, ``{'password ': 'S'}``) still names its value: the value is
    redacted in text, and in the line a log call writes with that text as a field and as
    an exception's message (failed on 4e07534: the name had to end at its quote)."""
    text = outer.format(t=shape.format(k=name + inside, v=SECRET))
    assert SECRET not in scrub_text(text)
    line = _logged_line(text)
    assert SECRET not in line
    assert json.loads(line)["event"] == "workspace_terminal_failure"


def _logged_line(text: str) -> str:
    """The JSON line one terminal failure carrying ``text`` (a field, an exception's
    message) is written as, to a real OBS_FILE."""
    import tempfile

    import obs
    import obs.testing

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="none")
        try:
            obs.get_logger("app").error(
                "workspace_terminal_failure", detail=text, exc_info=RuntimeError(text)
            )
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        finally:
            obs.testing.reset()
