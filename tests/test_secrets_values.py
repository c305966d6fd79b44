"""Secret ``name=value`` pairs inside field values: a header line, a cookie, a query token,
a JSON or repr text, a command line. Every str value a caller logs (at any depth, a bound or
an explicit ``body`` too) is scrubbed as obs' own text is; event names are not (they are
templates), and neither is a body that is the event itself."""

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

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Qx7hunter2Qx7"

NAMES = ["password", "api_key", "apiKey", "X-Api-Key", "hf_token", "--hf-token", "token",
         "client_secret", "access_token", "db_password", "privateKey", "session_cookie",
         "DB_PASSWORD", "Authorization", "cookie", "session_id", "x-auth-token"]  # fmt: skip
#: How a secret pair reads in a value someone logs.
SHAPES = ["{k}={v}", "{k}: {v}", "{k}:{v}", "{k} = {v}", "{k}='{v}'", '"{k}": "{v}"',
          "{{'{k}': '{v}'}}", '{{"{k}": "{v}"}}', "https://h/v1?{k}={v}&x=1",
          "GET /p?a=1&{k}={v} HTTP/1.1", "cmd --model m {k}={v} --tp 8",
          "error: {k}={v}", "M({k}='{v}', n=1)"]  # fmt: skip
HEADERS = ["Authorization: Token {v}", "Authorization: ApiKey {v}", "Cookie: session={v}",
           "Set-Cookie: token={v}; Path=/", "X-Api-Key: {v}"]  # fmt: skip


def _wrap(kind: str, text: str) -> Any:
    return {
        "plain": text,
        "list": ["x", text],
        "tuple": ("x", text),
        "dict": {"cfg": text},
        "nested": {"a": [{"b": text}]},
    }[kind]


def _lines(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _one_line(call: Callable[[Any], None]) -> dict[str, Any]:
    """The one JSON line ``call(log)`` writes (OBS_FILE; obs reset afterwards)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="stdout")
        try:
            call(obs.get_logger("app"))
            obs.flush(5)
            (line,) = _lines(path)
        finally:
            obs.testing.reset()
    return line


@given(
    name=st.sampled_from(NAMES),
    shape=st.sampled_from(SHAPES + HEADERS),
    kind=st.sampled_from(["plain", "list", "tuple", "dict", "nested"]),
    how=st.sampled_from(["field", "bind", "body", "once"]),
)
@settings(max_examples=150, deadline=None)
def test_secret_pair_in_a_value_is_redacted(name: str, shape: str, kind: str, how: str) -> None:
    """The secret never reaches the line; the event, and the other fields, are intact."""
    text = shape.format(k=name, v=SECRET)
    value = _wrap(kind, text) if how != "body" else text

    def call(log: Any) -> None:
        if how == "field":
            log.error("workspace_terminal_failure", detail=value, n=1)
        elif how == "bind":
            log.bind(detail=value).error("workspace_terminal_failure", n=1)
        elif how == "body":
            log.error("workspace_terminal_failure", body=value, n=1)
        else:
            log.error_once("workspace_terminal_failure", detail=value, n=1)

    line = _one_line(call)
    assert SECRET not in json.dumps(line)
    assert (line["event"], line["n"]) == ("workspace_terminal_failure", 1)
    assert "[REDACTED]" in json.dumps(line)


def test_plain_pairs_and_event_names_stay() -> None:
    """Pairs under names that are not secret are kept as logged; an event name (a template)
    and a body that is the event are not rewritten."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format="json", sdk_disabled=True, file=path, stream="stdout")
        try:
            log = obs.get_logger("app")
            plain = "SamplingParams(max_tokens=128, tokenizer=llama), key: none, a=1"
            log.info("request_done", params=plain, url="http://h:8000/v1?model=m")
            log.info("token=%s")
            obs.flush(5)
            first, second = _lines(path)
        finally:
            obs.testing.reset()
    assert (first["params"], first["url"]) == (plain, "http://h:8000/v1?model=m")
    assert (second["event"], second["body"]) == ("token=%s", "token=%s")


CHILD = """
import logging, sys
import obs
obs.configure()
S = sys.argv[1]
log = obs.get_logger("app")
log.error("workspace_terminal_failure", sent=f"Authorization: Token {S}",
          url=f"https://h/v1/chat?access_token={S}", cfg=[f"password={S}"],
          body=f"failed with cookie: session={S}")
log.bind(cmd=f"vllm serve m --hf-token={S}").warning("workspace_attempt")
logging.getLogger("vllm.x").warning("loaded", extra={"detail": '{"api_key": "%s"}' % S})
obs.flush(timeout=5)
"""


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_every_route(tmp_path: Path, protocol: str) -> None:
    """stderr, OBS_FILE and a real OTLP receiver: no secret; the alert's event intact."""
    (tmp_path / "c.py").write_text(textwrap.dedent(CHILD))
    with OTLPReceiver() as rx:
        grpc = protocol == "grpc"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
        env.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"), OBS_FORMAT="json")
        env.update(OBS_SPOOL_DIR=str(tmp_path / "spool"), OTEL_BLRP_SCHEDULE_DELAY="50")
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint if grpc else rx.http_endpoint)
        env.update(OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py"), SECRET],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = rx.wait_for(3, timeout=10)
    lines = [json.loads(x) for x in proc.stderr.splitlines()]
    for text in (proc.stderr, (tmp_path / "f.jsonl").read_text(), repr(records)):
        assert SECRET not in text
    assert [x["event"] for x in lines] == [
        "workspace_terminal_failure",
        "workspace_attempt",
        "loaded",
    ]
    (alert,) = [r for r in records if r["event_name"] == "workspace_terminal_failure"]
    assert alert["attributes"]["event"] == "workspace_terminal_failure"


@given(
    flag=st.sampled_from(["--hf-token", "--api-key", "-password", "--client-secret"]),
    before=st.lists(st.sampled_from(["vllm", "serve", "m", "--tp", "8"]), max_size=4),
    after=st.lists(st.sampled_from(["--tp", "8", "--max-model-len", "4096"]), max_size=4),
    kind=st.sampled_from([list, tuple]),
)
@settings(max_examples=60, deadline=None)
def test_command_line_as_a_list_keeps_no_secret_option_value(
    flag: str, before: list[str], after: list[str], kind: type
) -> None:
    """``cmd=["vllm", "serve", "m", "--hf-token", secret]`` (sys.argv, a subprocess's
    args): the item after a secret-named option is redacted, the rest kept as logged."""
    argv = kind([*before, flag, SECRET, *after])
    with obs.testing.capture_events() as events:
        obs.get_logger("app").error("workspace_terminal_failure", cmd=argv)
    (event,) = [e for e in events if e.get("event") == "workspace_terminal_failure"]
    obs.testing.reset()
    assert event["cmd"] == [*before, flag, "[REDACTED]", *after]


@given(
    option=st.sampled_from(["--hf-token", "--api-key", "-password", "--db_password",
                            "--client-secret", "--access-token", "--extra-headers"]),
    where=st.sampled_from(["{o} {v}", "vllm serve m {o} {v} --tp 8", "{o}\t{v}",
                           "run --model m {o}  {v}"]),
    how=st.sampled_from(["field", "nested", "body"]),
)  # fmt: skip
@settings(max_examples=60, deadline=None)
def test_a_secret_option_and_its_value_in_a_command_line_text(
    option: str, where: str, how: str
) -> None:
    """A command line logged as one string (``--hf-token S``, a blank between the option
    and its value) keeps no secret; options that are not secret keep their values."""
    text = where.format(o=option, v=SECRET)

    def call(log: Any) -> None:
        if how == "field":
            log.warning("workspace_attempt", cmd=text)
        elif how == "nested":
            log.warning("workspace_attempt", argv={"cmd": [text]})
        else:
            log.warning("workspace_attempt", body=text)

    line = _one_line(call)
    written = json.dumps(line)
    assert SECRET not in written
    assert line["event"] == "workspace_attempt"
    assert "--tp 8" in written or "--tp" not in text
    assert "--model m" in written or "--model" not in text


def test_option_values_that_are_not_secret_stay() -> None:
    """``--max-num-seqs 8 --served-model-name m -p 2``: nothing redacted."""
    from obs._secrets import scrub_text

    text = "vllm serve m --max-num-seqs 8 --served-model-name m -p 2 --session 3 --tokens 9"
    assert scrub_text(text) == text


def test_a_headers_pair_in_a_value_is_redacted() -> None:
    """``headers`` is a secret last word for a field name, and for a pair in text too."""
    from obs._secrets import scrub_text

    assert scrub_text(f"extra_headers={SECRET}, n=1") == "extra_headers=[REDACTED], n=1"
    assert scrub_text(f"otlp_header: {SECRET}") == "otlp_header: [REDACTED]"


@given(
    option=st.sampled_from(["--hf-token", "--api-key", "-password", "--client-secret"]),
    before=st.sampled_from(["'", '"', "\t", "\n", "b'", "['"]),
    how=st.sampled_from(["field", "positional", "tuple", "stdlib"]),
)
@settings(max_examples=80, deadline=None)
def test_a_secret_option_after_a_quote_or_a_line_break(option: str, before: str, how: str) -> None:
    """``'--hf-token S'`` (an argv item's repr, a tuple or bytes argument), ``"--api-key S"``
    in JSON, an option on a line of its own: the option is found after a quote, a tab or
    a line break too (only a blank or the text's start were looked at, so the scan never
    ran and the line, on the fast path too, kept the value)."""
    text = f"{before}{option} {SECRET}"

    def call(log: Any) -> None:
        if how == "field":
            log.warning("workspace_attempt", cmd=text)
        elif how == "positional":
            log.warning("workspace_attempt %s", text.encode())
        elif how == "tuple":
            log.warning("workspace_attempt %s", (f"{option} {SECRET}",))
        else:
            logging.getLogger("vllm.x").warning("run %s", [f"{option} {SECRET}"])

    assert SECRET not in json.dumps(_one_line(call))
