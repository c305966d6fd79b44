"""Secrets in shapes the pair scan did not read: a line break between a name and its value,
JSON encoded twice, percent-encoded pairs, field names and dict keys that hold a pair, a
header tuple longer than a pair, and a pair inside an event name (its value only: the
event an alert keys on stays byte for byte). Each on every sink: JSON lines, the console,
OBS_FILE, OTLP over gRPC and HTTP to a real receiver, and the spool."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs
import obs.testing
from obs._receiver import OTLPReceiver
from obs._secrets import SECRET_LAST_WORDS, SECRET_WORDS, is_secret_name, scrub_text

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Qx7hunter2Qx7"

#: Names from the credential-name table, and spellings of them.
NAMES = [*sorted(SECRET_WORDS), *(f"hf_{w}" for w in sorted(SECRET_LAST_WORDS)),
         "api_key", "X-Api-Key", "access_token", "client_secret", "DB_PASSWORD", "HF_TOKEN",
         "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "GITHUB_PAT", "session_id",
         "privateKey"]  # fmt: skip
#: Blanks between a name, its separator and its value (a line break too).
BLANKS = ["", " ", "\t", "\n", "\r\n", "\n  ", " \t\n\t"]
SEPS = ["=", ":", "=>"]  # "=>": a Ruby hash, a PHP array


def _one_line(call: Callable[[Any], None], fmt: str = "json") -> str:
    """The text ``call(log)`` writes to OBS_FILE (obs reset afterwards)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.jsonl")
        obs.configure(format=fmt, sdk_disabled=True, file=path, stream="stdout")
        try:
            call(obs.get_logger("app"))
            obs.flush(5)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        finally:
            obs.testing.reset()
    return text


def _encode_json(text: str, times: int) -> str:
    for _ in range(times):
        text = json.dumps(text)
    return text


@given(
    name=st.sampled_from(NAMES),
    sep=st.sampled_from(SEPS),
    before=st.sampled_from(BLANKS),
    after=st.sampled_from(BLANKS),
    quoted=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_blanks_and_line_breaks_between_a_name_and_its_value(
    name: str, sep: str, before: str, after: str, quoted: bool
) -> None:
    """``password:\\n  S``, ``token =\\tS``, ``api_key\\n=S``: the value after any blanks
    is the secret, and blanks before the separator (a line break too) keep the pair."""
    value = f'"{SECRET}"' if quoted else SECRET
    text = f"config {name}{before}{sep}{after}{value}, n=1"
    out = scrub_text(text)
    assert SECRET not in out
    assert out.startswith("config ")
    assert out.endswith(", n=1") or (name, sep) == ("cookie", ":")  # a header: to its end


@given(
    header=st.sampled_from(["Cookie", "cookie", "Set-Cookie", "COOKIE"]),
    before=st.lists(st.sampled_from(["a=1", "lang=en", "_ga=GA1.2.3"]), max_size=3),
    name=st.sampled_from(["session", "sid", "id", "x", "_gh_sess"]),
    after=st.lists(st.sampled_from(["Path=/", "HttpOnly", "b=2"]), max_size=2),
    where=st.sampled_from(["{h}", "GET / HTTP/1.1\r\n{h}\r\nHost: h", "sent {{'x': '{h}'}}"]),
)
@settings(max_examples=120, deadline=None)
def test_every_cookie_of_a_cookie_header(
    header: str, before: list[str], name: str, after: list[str], where: str
) -> None:
    """``Cookie: a=1; session=S``: every cookie of the header is its secret, whatever its
    name (only the first was taken as the header's value); the next line stays."""
    cookies = "; ".join([*before, f"{name}={SECRET}", *after])
    text = where.format(h=f"{header}: {cookies}")
    out = scrub_text(text)
    assert SECRET not in out
    assert "Host: h" in out or "Host" not in text
    line = _one_line(lambda log: log.error("workspace_terminal_failure", sent=text, n=1))
    assert SECRET not in line


@given(
    scheme=st.sampled_from(["https", "http", "HTTPS"]),
    where=st.sampled_from(["{u}", "git clone {u}", "remote={u}", "({u})", "'{u}'", "{u} failed"]),
    path=st.sampled_from(["", "/o/r.git", "/p?email=a@b.com"]),
)
@settings(max_examples=60, deadline=None)
def test_a_token_sent_as_the_url_user(scheme: str, where: str, path: str) -> None:
    """``https://<token>@github.com/o/r.git`` (git's credential URLs): an http(s) URL's
    user with no password is the credential; an ssh user and an email stay."""
    text = where.format(u=f"{scheme}://{SECRET}@github.com{path}")
    out = scrub_text(text)
    assert SECRET not in out
    assert "github.com" in out
    assert "a@b.com" in out or "a@b.com" not in text
    line = _one_line(lambda log: log.error("workspace_terminal_failure", cmd=text, n=1))
    assert SECRET not in line
    for plain in ["ssh://git@github.com/o/r", "mail a@b.com: ok", "https://h/?to=a@b.com"]:
        assert scrub_text(plain) == plain


@given(
    name=st.sampled_from(NAMES),
    times=st.integers(1, 3),
    inner=st.sampled_from([{"{k}": "{v}"}, {"a": 1, "cfg": {"{k}": "{v}"}}, ["{k}", "{v}"]]),
    indent=st.sampled_from([None, 2, "\t"]),
    quote=st.sampled_from(['"', "'", ""]),
)
@settings(max_examples=200, deadline=None)
def test_json_encoded_more_than_once(
    name: str, times: int, inner: Any, indent: Any, quote: str
) -> None:
    """A value that is a JSON string holding JSON (``"{\\"api_key\\": \\"S\\"}"``), one to
    three times over, pretty-printed too (its line breaks and tabs escaped), or holding a
    dict's repr or YAML-like text: the escaped pair is a pair."""
    doc = json.loads(json.dumps(inner).replace("{k}", name).replace("{v}", f"{SECRET} x"))
    if isinstance(doc, list):  # a (name, value) pair as a JSON array: a dict is the pair
        doc = {doc[0]: doc[1]}
    text = json.dumps(doc, indent=indent)
    if quote != '"':  # a repr's or YAML's quoting, its line breaks kept
        text = text.replace('"', quote)
    text = _encode_json(text, times)
    assert SECRET not in scrub_text(text)
    line = _one_line(lambda log: log.error("workspace_terminal_failure", payload=text))
    assert SECRET not in line
    assert json.loads(line)["event"] == "workspace_terminal_failure"


@given(
    name=st.sampled_from(NAMES),
    shape=st.sampled_from(["{k}={v}", "x=1&{k}={v}", "https://h/cb?x=1&{k}={v}&y=2"]),
    times=st.integers(1, 2),
    where=st.sampled_from(["{t}", "next={t}", "GET /login?redirect={t} HTTP/1.1"]),
)
@settings(max_examples=150, deadline=None)
def test_percent_encoded_pairs(name: str, shape: str, times: int, where: str) -> None:
    """``api_key%3DS``, ``%26token%3DS``, a URL with ``?x=1&access_token=S`` inside a
    percent-encoded query (once or twice over): the decoded pair's value is redacted."""
    text = shape.format(k=name, v=SECRET)
    for _ in range(times):
        text = quote(text, safe="")
    text = where.format(t=text)
    assert SECRET not in scrub_text(text)
    line = _one_line(lambda log: log.error("workspace_terminal_failure", url=text, n=1))
    assert SECRET not in line
    assert json.loads(line)["event"] == "workspace_terminal_failure"


def test_percent_signs_without_a_secret_stay() -> None:
    """Text with ``%`` but no encoded secret pair is written as logged (not decoded)."""
    for text in ["done 100%", "x=50%25", "https://h/p?q=a%20b&n=1", "loss=3.2% token_count=9"]:
        assert scrub_text(text) == text


@given(
    name=st.sampled_from(NAMES),
    sep=st.sampled_from(["=", ": ", ":", " = "]),
    where=st.sampled_from(["kw", "bind", "dict", "nested", "list_of_dicts"]),
    plain_name=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_field_names_and_keys_that_hold_a_pair(
    name: str, sep: str, where: str, plain_name: bool
) -> None:
    """``log.info("e", **{"password=S": 1})``, ``d={"password=S": 1}``, keys at any depth:
    the name is written with its value redacted; the event and other fields stay."""
    key = f"{'note ' if plain_name else ''}{name}{sep}{SECRET}"

    def call(log: Any) -> None:
        if where == "kw":
            log.error("workspace_terminal_failure", n=1, **{key: 1})
        elif where == "bind":
            log.bind(**{key: 1}).error("workspace_terminal_failure", n=1)
        elif where == "dict":
            log.error("workspace_terminal_failure", n=1, d={key: 1})
        elif where == "nested":
            log.error("workspace_terminal_failure", n=1, d={"a": [{"b": {key: {"c": 1}}}]})
        else:
            log.error("workspace_terminal_failure", n=1, d=[{key: "x"}, {"url": 1}])

    line = _one_line(call)
    assert SECRET not in line
    fields = json.loads(line)
    assert (fields["event"], fields["n"]) == ("workspace_terminal_failure", 1)
    assert name in line  # the name is kept, only the value in it redacted


@given(
    name=st.sampled_from(NAMES),
    value=st.sampled_from(["Bearer {v}", "{v}", "Token {v}"]),
    rest=st.lists(st.sampled_from([True, False, None, 3]), min_size=1, max_size=3),
    kind=st.sampled_from([tuple, list]),
    as_bytes=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_a_header_tuple_longer_than_a_pair(
    name: str, value: str, rest: list[Any], kind: type, as_bytes: bool
) -> None:
    """``("Authorization", "Bearer S", True)`` (an HPACK header with its never-index flag),
    also of bytes and inside a header list: the value is redacted, the flags kept."""
    header: Any = kind([name, value.format(v=SECRET), *rest])
    if as_bytes:
        header = kind([name.encode(), value.format(v=SECRET).encode(), *rest])
    line = _one_line(lambda log: log.error("workspace_terminal_failure", h=[header], n=1))
    assert SECRET not in line
    (shown,) = json.loads(line)["h"]
    assert shown[1] == "[REDACTED]"
    assert shown[2:] == rest


def test_lists_that_do_not_start_with_a_secret_name_stay() -> None:
    """Only a secret name first makes the items after it a value."""
    line = json.loads(_one_line(lambda log: log.info("e", h=("model", "m", True, "x"))))
    assert line["h"] == ["model", "m", True, "x"]


@given(
    name=st.sampled_from(NAMES),
    sep=st.sampled_from(["=", ": ", "="]),
    prefix=st.sampled_from(["", "login failed ", "connect("]),
    api=st.sampled_from(["log", "stdlib", "once"]),
)
@settings(max_examples=120, deadline=None)
def test_a_pair_inside_an_event_name(name: str, sep: str, prefix: str, api: str) -> None:
    """``log.info("login password=S")`` and a stdlib message logged without arguments (its
    own event name): the value is redacted, the rest of the name kept."""
    event = f"{prefix}{name}{sep}{SECRET}"

    def call(log: Any) -> None:
        if api == "log":
            log.error(event)
        elif api == "once":
            log.error_once(event)
        else:
            import logging

            logging.getLogger("x").error(event)

    line = _one_line(call)
    assert SECRET not in line
    assert json.loads(line)["event"] == f"{prefix}{name}{sep}[REDACTED]"


@given(
    name=st.sampled_from(NAMES),
    placeholder=st.sampled_from(["%s", "%r", "%d", "%(pw)s", "%-8s", "{}", "{tok}", "'%s'"]),
    api=st.sampled_from(["log", "stdlib"]),
)
@settings(max_examples=80, deadline=None)
def test_event_names_that_are_templates_stay(name: str, placeholder: str, api: str) -> None:
    """``"password=%s"`` is a template (alerts key on it): byte for byte, as is every event
    name without a secret pair (``workspace_terminal_failure``)."""
    for event in (f"{name}={placeholder}", "workspace_terminal_failure", "loaded model: m"):

        def call(log: Any, event: str = event) -> None:
            if api == "log":
                log.error(event)
            else:
                import logging

                logging.getLogger("x").error(event)

        assert json.loads(_one_line(call))["event"] == event


CHILD = """
import json, logging, sys
from urllib.parse import quote
import obs
obs.configure()
S = sys.argv[1]
log = obs.get_logger("app")
log.error("workspace_terminal_failure", n=1, **{f"password={S}": 1})
header = ("Authorization", f"Bearer {S}", True)
log.error("workspace_terminal_failure", n=2, d={f"api_key: {S}": 1, "h": header})
log.error("workspace_terminal_failure", n=3, v=json.dumps(json.dumps({"api_key": S})))
url = "https://h/cb?next=" + quote(f"/x?a=1&access_token={S}", safe="")
log.error("workspace_terminal_failure", n=4, url=url)
log.error("workspace_terminal_failure", n=5, cfg=f"password:\\n  {S}")
log.error(f"login failed password={S}")
logging.getLogger("x").error(f"token={S}")
obs.flush(timeout=5)
"""


def _run_child(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    full.update(PYTHONPATH=str(ROOT), OBS_FILE=str(tmp_path / "f.jsonl"))
    full.update(OBS_SPOOL_DIR=str(tmp_path / "spool"), OTEL_BLRP_SCHEDULE_DELAY="50", **env)
    return subprocess.run(
        [sys.executable, str(script), SECRET],
        cwd=tmp_path, env=full, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _sink_texts(tmp_path: Path, proc: subprocess.CompletedProcess[str]) -> list[str]:
    spooled = [
        p.read_text("utf-8", "replace") for p in (tmp_path / "spool").rglob("*") if p.is_file()
    ]
    return [proc.stdout, proc.stderr, (tmp_path / "f.jsonl").read_text(), *spooled]


@pytest.mark.parametrize(("protocol", "fmt"), [("http/protobuf", "json"), ("grpc", "console")])
def test_every_sink(tmp_path: Path, protocol: str, fmt: str) -> None:
    """The console (JSON lines or console text), OBS_FILE and a real OTLP receiver: no
    secret; the alert's event arrives intact, under its own name."""
    with OTLPReceiver() as rx:
        grpc = protocol == "grpc"
        proc = _run_child(
            tmp_path,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint if grpc else rx.http_endpoint,
             "OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OBS_FORMAT": fmt},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = rx.wait_for(7, timeout=10)
    for text in [*_sink_texts(tmp_path, proc), repr(records)]:
        assert SECRET not in text
    names = [r["event_name"] for r in records]
    assert names.count("workspace_terminal_failure") == 5
    assert "login failed password=[REDACTED]" in names
    assert "token=[REDACTED]" in names


def test_the_spool(tmp_path: Path) -> None:
    """With the collector down the records are spooled: no secret in the spool files."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run_child(
        tmp_path,
        {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
         "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TIMEOUT": "0.5",
         "OBS_SHUTDOWN_TIMEOUT": "2", "OBS_FORMAT": "json"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    spool = [p for p in (tmp_path / "spool").rglob("*") if p.is_file()]
    assert any("workspace_terminal_failure" in p.read_text("utf-8", "replace") for p in spool)
    for text in _sink_texts(tmp_path, proc):
        assert SECRET not in text


def test_a_pair_inside_a_logger_name_on_the_fused_path() -> None:
    """``get_logger("svc token=S")``: the first call (a new field) takes the chain, later
    ones the fused path, which writes the logger's name as it was scrubbed once."""

    def call(log: Any) -> None:
        named = obs.get_logger(f"svc:token={SECRET}")
        for _ in range(3):
            named.info("request_done", k="v")

    text = _one_line(call)
    assert SECRET not in text
    assert [json.loads(x)["logger"] for x in text.splitlines()] == ["svc:token=[REDACTED]"] * 3


#: What follows a secret name in real configs: a number, a version, a qualifier.
SUFFIXES = ["1", "2", "_2", "_10", "V2", "_v3", "-v1", "_old", "_new", "Backup", "_prev",
            "_b64", "_value", "_default", "2_old"]  # fmt: skip


@given(
    name=st.sampled_from(NAMES),
    suffix=st.sampled_from(SUFFIXES),
    where=st.sampled_from(["field", "dict_key", "text", "bound"]),
)
@settings(max_examples=400, deadline=None)
def test_a_secret_name_with_a_number_or_version_after_it(
    name: str, suffix: str, where: str
) -> None:
    """``hf_token2``, ``access_token_v2``, ``apiKey2``, ``refresh_token_old`` name a secret
    as their unnumbered names do (they were written as logged: the last word was the
    number). As a field, a dict key, a pair in text and a bound name."""
    key = f"{name}{suffix}"
    if name.isupper() and suffix[0].isalpha():  # HF_TOKEN_V2: a constant's own style
        key = f"{name}_{suffix.upper()}"

    def call(log: Any) -> None:
        if where == "field":
            log.error("workspace_terminal_failure", **{key: SECRET})
        elif where == "dict_key":
            log.error("workspace_terminal_failure", cfg={key: SECRET})
        elif where == "text":
            msg = "retrying with " + key + "=" + SECRET
            log.error("workspace_terminal_failure", msg=msg)
        else:
            log.bind(**{key: SECRET}).error("workspace_terminal_failure")

    text = _one_line(call)
    assert SECRET not in text
    assert json.loads(text)["event"] == "workspace_terminal_failure"


@pytest.mark.parametrize(
    "key",
    [
        "num_tokens_2",
        "max_tokens",
        "token_count",
        "path_2",
        "sha256",
        "tokenizer_v2",
        "model_v2",
        "max_token_num",
        "keyboard_1",
        "patience_3",
    ],
)
def test_names_that_only_look_numbered_stay(key: str) -> None:
    """Counting and version names near a secret word keep their values."""
    text = _one_line(lambda log: log.info("e", **{key: "shown-value"}))
    assert json.loads(text)[key] == "shown-value"


@given(
    name=st.sampled_from([n for n in NAMES if len(n) > 3]),
    encoded=st.sets(st.integers(0, 24), min_size=1, max_size=4),
    sep=st.sampled_from(["=", "%3D", ": "]),
    where=st.sampled_from(["{t}", "GET /p?n=1&{t} HTTP/1.1", "cfg {t}, n=1"]),
)
@settings(max_examples=200, deadline=None)
def test_a_percent_encoded_name(name: str, encoded: set[int], sep: str, where: str) -> None:
    """``api%5Fkey=S``, ``hf%5Ftoken=S``, ``pass%77ord=S``: a name with any of its
    characters percent-encoded (an encoder that escapes ``_``; the keys of
    ``OTEL_RESOURCE_ATTRIBUTES``, which are percent-encoded) is read decoded, in a value and
    in obs' own error text (a refused ``OTEL_RESOURCE_ATTRIBUTES`` quoted it raw before)."""
    from obs.errors import ConfigError
    from obs.settings import load_settings

    spelled = "".join(f"%{ord(c):02X}" if i % len(name) in encoded else c
                      for i, c in enumerate(name))  # fmt: skip
    text = where.format(t=f"{spelled}{sep}{SECRET}")
    assert SECRET not in scrub_text(text)
    line = _one_line(lambda log: log.error("workspace_terminal_failure", url=text, n=1))
    assert SECRET not in line
    assert json.loads(line)["event"] == "workspace_terminal_failure"
    with pytest.raises(ConfigError) as refused:  # a pair without "=" is refused
        load_settings(env={"OTEL_RESOURCE_ATTRIBUTES": f"{spelled}={SECRET},refused"})
    assert SECRET not in str(refused.value)


SERVICE_CHILD = """
import obs
obs.configure()
obs.get_logger("app").error("workspace_terminal_failure", n=1)
obs.flush(timeout=5)
"""


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OTEL_SERVICE_NAME", "svc?token={s}"),
     ("OTEL_RESOURCE_ATTRIBUTES", "service.name=https://deploy:{s}@git.example.com/svc,team=ml")],
)  # fmt: skip
@pytest.mark.parametrize("collector", ["up", "down"])
def test_a_secret_in_the_service_name(
    tmp_path: Path, variable: str, value: str, collector: str
) -> None:
    """The service name is text obs writes: the resource's ``service.name`` (to the
    collector, and in the spool), the per-service spool directory's name and ``python -m
    obs spool list`` carry it scrubbed (the name was exported and spooled as configured)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), OTEL_BLRP_SCHEDULE_DELAY="50")
    env.update({variable: value.format(s=SECRET), "OBS_SHUTDOWN_TIMEOUT": "2"})
    (tmp_path / "c.py").write_text(textwrap.dedent(SERVICE_CHILD))
    with OTLPReceiver() as rx, socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}"
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx.http_endpoint if collector == "up" else down
        env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "0.5"
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = rx.wait_for(1, timeout=10) if collector == "up" else []
    listed = subprocess.run(
        [sys.executable, "-m", "obs", "spool", "list"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    written = [p for p in tmp_path.rglob("*") if "obs-spool" in str(p)]
    texts = [proc.stdout, proc.stderr, listed.stdout, listed.stderr, repr(records)]
    texts += [str(p) for p in written] + [p.read_text() for p in written if p.is_file()]
    for text in texts:
        assert SECRET not in text
    if collector == "up":
        assert "[REDACTED]" in records[0]["resource"]["service.name"]
    else:
        assert any("workspace_terminal_failure" in t for t in texts)


@given(
    name=st.sampled_from(NAMES),
    shape=st.sampled_from(["{p}[{k}]={v}", "{p}[{k}]: {v}", "POST /login?{p}[{k}]={v}&n=1",
                           "{p}[x][{k}]={v}", "{p}%5B{k}%5D={v}", "{{'{p}[{k}]': '{v}'}}",
                           "{p}[{k}][]={v}"]),
    parent=st.sampled_from(["user", "config", "params", "data"]),
)  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_a_subscripted_name(name: str, shape: str, parent: str) -> None:
    """``user[password]=S`` (a form body or query string as Rails and PHP spell nested
    fields), ``config[x][api_key]: S``, encoded ``user%5Bpassword%5D=S``: the name with its
    subscripts is the pair's name, and a secret word in it makes the value secret."""
    text = shape.format(p=parent, k=name, v=SECRET)
    assert SECRET not in scrub_text(text)
    line = _one_line(lambda log: log.error("workspace_terminal_failure", body=text, n=1))
    assert SECRET not in line
    assert json.loads(line)["event"] == "workspace_terminal_failure"


def test_subscripts_that_are_not_secret_stay() -> None:
    """A subscripted name with no secret word keeps its value."""
    for text in ["tokens[0]=5", "user[name]=bob", "x[key]=1", "a[b][c]: d, max_tokens[1]=2"]:
        assert scrub_text(text) == text


@given(
    name=st.sampled_from(NAMES),
    sep=st.sampled_from([":=", "::=", "==", "=="]),
    before=st.sampled_from(BLANKS),
    after=st.sampled_from(["", " ", "\t"]),
    quoted=st.booleans(),
    where=st.sampled_from(["{t}, n=1", "SET @{t};", "if {t} {{"]),
)
@settings(max_examples=200, deadline=None)
def test_a_separator_of_several_characters(  # noqa: PLR0917 - Hypothesis passes each part
    name: str, sep: str, before: str, after: str, quoted: bool, where: str
) -> None:
    """``password := S`` (Go, SQL's ``SET @password := 'S'``), ``password ::= S``,
    ``token == S``: the whole separator goes before the value (only its first character
    did, and a blank after the rest left the value as it was)."""
    value = f"'{SECRET}'" if quoted else SECRET
    text = where.format(t=f"{name}{before}{sep}{after}{value}")
    assert SECRET not in scrub_text(text)
    line = _one_line(lambda log: log.error("workspace_terminal_failure", sql=text, n=1))
    assert SECRET not in line


@given(
    name=st.sampled_from(NAMES),
    indicator=st.sampled_from(["|", ">", "|-", ">-", "|+", "|2"]),
    lines=st.integers(1, 3),
    indent=st.sampled_from(["  ", "    ", "\t"]),
)
@settings(max_examples=150, deadline=None)
def test_a_yaml_block_scalar(name: str, indicator: str, lines: int, indent: str) -> None:
    """``private_key: |`` then the key's lines, indented (a Kubernetes Secret's
    ``stringData``, a PEM key in YAML): every line of the block is the value (only the
    indicator was), and what follows the block stays."""
    block = "".join(f"\n  {indent}{SECRET}{i}" for i in range(lines))  # below the name
    text = f"stringData:\n  {name}: {indicator}{block}\n  type: x\nkind: Secret"
    out = scrub_text(text)
    assert SECRET not in out
    assert out.endswith("\n  type: x\nkind: Secret")
    assert SECRET not in _one_line(lambda log: log.error("workspace_attempt", manifest=text))


@given(
    url=st.sampled_from(["https://user:{s}@host/p", "postgres://app:{s}@db:5432/x",
                         "https://{s}@github.com/o/r.git", "user:{s}@host"]),
    times=st.integers(1, 2),
    where=st.sampled_from(["{t}", "GET /login?next={t}&n=1 HTTP/1.1", "redirect_uri={t}"]),
    safe=st.sampled_from(["", "/"]),
)  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_a_percent_encoded_url_password(url: str, times: int, where: str, safe: str) -> None:
    """A URL with a password (or a token as its user) percent-encoded in a query string
    (``?next=https%3A%2F%2Fuser%3A<secret>%40host``, a redirect or callback URL): the
    decoded text's userinfo is scrubbed, as a pair in it was."""
    text = url.format(s=SECRET)
    for _ in range(times):
        text = quote(text, safe=safe)
    text = where.format(t=text)
    assert SECRET not in scrub_text(text)
    line = _one_line(lambda log: log.error("workspace_terminal_failure", url=text, n=1))
    assert SECRET not in line


@pytest.mark.parametrize(
    "attributes",
    ["a%3Apassword%3D{s}=1", "https%3A%2F%2Fu%3A{s}%40h=1", "team=ml,Bearer%20{s}=2",
     "api%5Fkey%3D{s}=x"],
)  # fmt: skip
def test_a_secret_in_a_resource_attribute_name(tmp_path: Path, attributes: str) -> None:
    """``OTEL_RESOURCE_ATTRIBUTES`` names are percent-decoded text, as a field name is: a
    pair or a credential in one is scrubbed in the exported resource and in
    ``repr(settings)`` (the values always were; a name went out as it was)."""
    from obs.settings import load_settings

    raw = attributes.format(s=SECRET)
    assert SECRET not in repr(load_settings(env={"OTEL_RESOURCE_ATTRIBUTES": raw}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OBS_", "OTEL_"))}
    env.update(PYTHONPATH=str(ROOT), OTEL_RESOURCE_ATTRIBUTES=raw, OTEL_BLRP_SCHEDULE_DELAY="50")
    (tmp_path / "c.py").write_text(textwrap.dedent(SERVICE_CHILD))
    with OTLPReceiver() as rx:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx.http_endpoint
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "c.py")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = rx.wait_for(1, timeout=10)
    assert SECRET not in repr(records) + proc.stderr + proc.stdout
    assert records[0]["resource"]["service.name"]


@given(
    first=st.sampled_from(["API", "Api", "api", "Secret", "Private", "Access", "SSH", "Session",
                           "Signing", "Client", "Encryption"]),
    second=st.sampled_from(["Key", "key", "KEY", "Keys", "ID", "Id"]),
    sep=st.sampled_from([": ", "=", " = ", ":\t"]),
    where=st.sampled_from(["{t}", "Your {t}\nDone.", "created: {t}, n=1"]),
)  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_a_two_word_name_in_prose(first: str, second: str, sep: str, where: str) -> None:
    """``API Key: S``, ``Secret Key = S``, ``Session ID: S`` (a CLI's or a console's
    words, a blank between them): the two words are the name, as ``api_key`` is, when
    they are a secret pair; ``cache key: x`` keeps its value."""
    name = f"{first} {second}"
    text = where.format(t=f"{name}{sep}{SECRET}")
    secret = is_secret_name(f"{first}_{second}")
    assert (SECRET not in scrub_text(text)) == secret
    if secret:
        assert SECRET not in _one_line(lambda log: log.error("workspace_attempt", out=text))


def test_two_words_that_are_not_a_secret_pair_stay() -> None:
    """``cache key: 3``, ``the key: value``, ``request id=7``: kept as written."""
    for text in ["cache key: 3", "the key: value", "request id=7", "primary key = id"]:
        assert scrub_text(text) == text
