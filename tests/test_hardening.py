"""Issue 10, in process: secrets, redaction, config errors, bounds, control fields, severity.

Each class of defect found on the first release has a test here that failed on it; the
Hypothesis tests widen each one from the example to the class.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import stat
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import obs
import obs.stdlib
from obs._config import STATE
from obs._fields import CONTROL_SET
from obs.encode import MAX_WALK, REDACTED, is_secret_key, scrubbed_text, to_jsonable
from obs.errors import ConfigError
from obs.render import CONTROL_FIELDS, MAX_LINE, JSONRenderer
from obs.settings import load_settings
from obs.severity import alert_stage

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]
SECRET = "SECRET-MARKER-7f3a"
MAX_STR_LIMIT = 16 * 1024
FAST = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

SECRET_KEYS = [
    "password",
    "db_password",
    "passwd",
    "authToken",
    "accessToken",
    "refreshToken",
    "idToken",
    "hf_token",
    "HF_TOKEN",
    "privateKey",
    "private-key",
    "private_key",
    "X-Api-Key",
    "x_api_key",
    "apiKey",
    "api-key",
    "set-cookie",
    "Cookie",
    "Authorization",
    "client_secret",
    "clientSecret",
    "aws_secret_access_key",
    "otlp_headers",
    "basic_auth",
    "bearer",
    "credentials",
    "sessionId",
]
PUBLIC_KEYS = ["max_token_num", "num_tokens", "token_count", "dedup_key", "once_key", "model"]


@dataclasses.dataclass
class Creds:
    """A dataclass whose repr would show the password."""

    user: str
    password: str


class AttrsLike:
    """An attrs-style class (``__attrs_attrs__``) without importing attrs."""

    class _A:
        def __init__(self, name: str) -> None:
            self.name = name

    __attrs_attrs__ = (_A("user"), _A("apiKey"))

    def __init__(self) -> None:
        self.user = "u"
        self.apiKey = SECRET


class Point(typing.NamedTuple):
    """A named tuple with a secret field."""

    x: int
    token: str


class ReadOnly(Mapping[str, Any]):
    """A Mapping that is not a dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def containers(key: str) -> list[Any]:
    """Every container kind holding ``{key: SECRET}`` one or two levels down."""
    inner = {key: SECRET}
    return [
        inner,
        {"outer": inner},
        [inner],
        [{"a": [inner]}],
        (inner,),
        collections.OrderedDict(inner),
        collections.defaultdict(list, inner),
        ReadOnly(inner),
        {"x": ReadOnly({"y": inner})},
    ]


def written(stream: str, path: Path | None = None) -> str:
    """What obs wrote to the stream and the file."""
    return stream + (path.read_text() if path is not None and path.exists() else "")


class TestSecretKeys:
    @pytest.mark.parametrize("key", SECRET_KEYS)
    def test_secret_spellings(self, key: str) -> None:
        """One normaliser: case, '-', '_' and camelCase spellings of a secret are secret."""
        assert is_secret_key(key)

    @pytest.mark.parametrize("key", PUBLIC_KEYS)
    def test_public_spellings(self, key: str) -> None:
        """max_token_num, num_tokens, dedup_key stay readable."""
        assert not is_secret_key(key)

    @pytest.mark.parametrize("key", ["password", "authToken", "X-Api-Key", "set-cookie"])
    def test_every_container_kind(self, key: str) -> None:
        """A secret in any container kind, at any depth, is redacted (failed on main for all
        but a dict one level down)."""
        for value in containers(key):
            assert SECRET not in json.dumps(to_jsonable(value)), value

    def test_dataclass_attrs_namedtuple(self) -> None:
        """Dataclasses, attrs classes and named tuples are walked by field, never by repr."""
        out = to_jsonable([Creds("u", SECRET), AttrsLike(), Point(1, SECRET)])
        assert [
            {"user": "u", "password": REDACTED},
            {"user": "u", "apiKey": REDACTED},
            {"x": 1, "token": REDACTED},
        ] == out

    @FAST
    @given(
        key=st.sampled_from(SECRET_KEYS),
        shape=st.recursive(
            st.just("LEAF"),
            lambda inner: st.one_of(
                st.lists(inner, min_size=1, max_size=3),
                st.dictionaries(st.sampled_from(["a", "b", "cfg"]), inner, min_size=1),
                st.tuples(inner),
            ),
            max_leaves=6,
        ),
    )
    def test_any_nesting_through_the_chain(
        self, key: str, shape: Any, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Through the whole chain, a secret anywhere in any nesting never reaches the line."""

        def build(node: Any) -> Any:
            if node == "LEAF":
                return {key: SECRET, "ok": 1}
            if isinstance(node, list):
                return [build(n) for n in node]
            if isinstance(node, tuple):
                return tuple(build(n) for n in node)
            return {k: build(v) for k, v in node.items()}

        obs.configure(format="json", sdk_disabled=True)
        obs.get_logger("t").info("nested", value=build(shape))
        structlog.contextvars.bind_contextvars(ctx=build(shape))
        try:
            obs.get_logger("t").bind(bound=build(shape)).warning("again")
        finally:
            structlog.contextvars.clear_contextvars()
        out = capsys.readouterr().err
        assert SECRET not in out
        assert 2 == len(out.splitlines())


class TestSecretsObsWrites:
    def test_repeat_summary_dedup_key(self, configure_json: Configure) -> None:
        """log_repeats_suppressed's dedup_key never repeats a secret value (it did on main)."""
        read = configure_json()
        log = obs.get_logger("t")
        for _ in range(3):
            log.warning_once("login_failed", password=SECRET, hf_token=SECRET, user="u")
            log.warning("retry", every_n=5, apiKey=SECRET)
        obs.flush()
        records = read()
        summaries = [r for r in records if r["event"] == "log_repeats_suppressed"]
        assert 2 == len(summaries)
        assert SECRET not in json.dumps(records)

    def test_settings_repr_and_config_errors(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """repr(Settings) and every ConfigError hide header values and URL passwords."""
        settings = load_settings(
            {
                "otlp_headers": {"authorization": f"Bearer {SECRET}"},
                "otlp_endpoint": f"http://user:{SECRET}@collector:4318",
            },
            env={},
        )
        texts = [repr(settings), str(settings)]
        for env in (
            {"OTEL_EXPORTER_OTLP_HEADERS": f"authorization{SECRET}"},
            {"OTEL_EXPORTER_OTLP_LOGS_HEADERS": f"x=1,{SECRET}"},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://u:{SECRET}@[::1"},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": f"ftp://u:{SECRET}@host"},
        ):
            with pytest.raises(ConfigError) as info:
                load_settings({}, env=env)
            texts += [str(info.value), repr(info.value.value), repr(info.value.args)]
        assert [] == [t for t in texts if SECRET in t]

    def test_lazy_path_error_line_has_no_secret(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A malformed headers variable on the lazy path is reported without its value."""
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Bearer {SECRET}")
        monkeypatch.setenv("OBS_FORMAT", "json")
        obs.get_logger("t").info("first")
        err = capsys.readouterr().err
        assert ["obs_internal_error", "first"] == [json.loads(x)["event"] for x in err.splitlines()]
        assert SECRET not in err

    def test_exception_text_url_password(self, configure_json: Configure) -> None:
        """A URL password or bearer token inside an exception message is redacted."""
        read = configure_json()
        error = ConnectionError(f"POST http://svc:{SECRET}@host:4318 failed: Bearer {SECRET}")
        obs.get_logger("t").error("post_failed", exc_info=error)
        record = read()[0]
        assert SECRET not in json.dumps(record)
        assert "http://svc:[REDACTED]@host:4318" in record["exception.message"]


class TestConfigErrors:
    BAD: typing.ClassVar[list[tuple[str, str]]] = [
        ("OBS_LEVEL", "²"),
        ("OBS_LEVEL", "25.5"),
        ("OBS_LEVEL", "1000"),
        ("OBS_EXPORT_ALL_RANKS_LEVEL", "-1"),
        ("OBS_SHUTDOWN_TIMEOUT", "inf"),
        ("OBS_SHUTDOWN_TIMEOUT", "1e400"),
        ("OBS_REPEAT_SUMMARY_SECONDS", "nan"),
        ("OBS_DEDUP_CAPACITY", "1e3"),
        ("OBS_DEDUP_CAPACITY", "99999999999999"),
        ("OBS_SPOOL_MAX_BYTES", "\u0661\u0660"),  # Arabic-Indic digits: int() reads them
        ("OBS_FILE", "/x/{host.upper}.jsonl"),
        ("OBS_FILE", "/x/{rank[0]}.jsonl"),
        ("OBS_FILE", "/x/{host:d}.jsonl"),
        ("OBS_FILE", "/x/{rank!r}.jsonl"),
        ("OBS_FILE", "/x/{}.jsonl"),
        ("OBS_STREAM", "stdlog"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1"),
        ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://h:0x10/"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", "/nonexistent/ca.pem"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/hostname"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "inf"),
        ("OTEL_BLRP_SCHEDULE_DELAY", "nan"),
        ("OTEL_BLRP_MAX_QUEUE_SIZE", "0x10"),
        ("OTEL_BLRP_EXPORT_TIMEOUT", "-inf"),
        ("OTEL_RESOURCE_ATTRIBUTES", "a=1\nb"),
    ]

    @pytest.mark.parametrize(("var", "value"), BAD)
    def test_bad_value_names_the_exact_variable(self, var: str, value: str) -> None:
        """Each bad value is a ConfigError naming the variable that held it (main raised
        ValueError/TypeError/OverflowError for several, or named the non-LOGS variable)."""
        with pytest.raises(ConfigError) as info:
            load_settings({}, env={var: value})
        assert var == info.value.variable

    @pytest.mark.parametrize("kind", ["directory", "unwritable"])
    def test_obs_file_that_cannot_be_opened(
        self, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """OBS_FILE naming a directory or a path under a file is a ConfigError at configure."""
        blocker = tmp_path / "plain"
        blocker.write_text("")
        path = str(tmp_path) if kind == "directory" else str(blocker / "x.jsonl")
        monkeypatch.setenv("OBS_FILE", path)
        with pytest.raises(ConfigError) as info:
            obs.configure(sdk_disabled=True)
        assert "OBS_FILE" == info.value.variable
        assert STATE.runtime is None

    def test_lazy_path_never_raises(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Without configure(), bad variables are reported once and logging goes on, with the
        good variables still applied (main raised into every log call for OBS_FILE)."""
        monkeypatch.setenv("OBS_FILE", str(tmp_path))
        monkeypatch.setenv("OBS_LEVEL", "²")
        monkeypatch.setenv("OBS_SHUTDOWN_TIMEOUT", "inf")
        monkeypatch.setenv("OBS_FORMAT", "json")
        log = obs.get_logger("t")
        for i in range(3):
            log.info("still_logging", i=i)
        records = [json.loads(x) for x in capsys.readouterr().err.splitlines()]
        errors = sorted(r["variable"] for r in records if r["event"] == "obs_internal_error")
        assert ["OBS_FILE", "OBS_LEVEL", "OBS_SHUTDOWN_TIMEOUT"] == errors
        assert 3 == sum(r["event"] == "still_logging" for r in records)

    @FAST
    @given(var=st.sampled_from(sorted(obs.settings.ENV_VARS)), value=st.text(max_size=30))
    def test_any_text_in_any_variable(self, var: str, value: str) -> None:
        """Whatever text a variable holds, load_settings returns or raises ConfigError naming
        it: never another exception type."""
        named = []
        try:
            load_settings({}, env={var: value})
        except ConfigError as exc:
            named.append(exc.variable)
        assert named in ([], [var])


class TestBounded:
    def test_walk_visits_a_bounded_number_of_values(self) -> None:
        """A 1M-key dict and a 1M-item list are walked MAX_WALK values at most (main walked
        every key: 2.5 s per call)."""
        visited = [0]

        class Counting(dict):  # type: ignore[type-arg]
            def items(self) -> Any:
                for item in super().items():
                    visited[0] += 1
                    yield item

        big = Counting((f"k{i}", i) for i in range(100_000))
        out = to_jsonable({"a": big, "b": list(range(1_000_000))})
        assert visited[0] <= MAX_WALK
        assert len(json.dumps(out)) < MAX_LINE

    def test_huge_inputs_give_bounded_lines(self, configure_json: Configure) -> None:
        """50 MB key, 1M-element once key, 50,000-deep cause chain: lines stay bounded and the
        control fields intact."""
        read = configure_json()
        log = obs.get_logger("t")
        log.info("huge_key", **{"k" * 50_000_000: 1})
        log.warning_once("huge_once", ids=list(range(1_000_000)))
        log.warning_once("huge_once", ids=list(range(1_000_000)))
        exc: BaseException = ValueError("root")
        for i in range(50_000):
            err = RuntimeError(i)
            err.__cause__ = exc
            exc = err
        log.error("deep_chain", exc_info=exc)
        records = read()
        assert ["huge_key", "huge_once", "deep_chain"] == [r["event"] for r in records]
        assert all(len(json.dumps(r)) <= MAX_LINE for r in records)
        assert "earlier exceptions in the chain not shown" in records[2]["exception.stacktrace"]


class StrWithBrokenLen(str):
    """A str subclass whose ``__len__`` raises."""

    __slots__ = ()

    def __len__(self) -> int:
        raise RuntimeError("no len")


ADVERSARIAL: list[Any] = [
    10**5000,
    -(10**400),
    "\ud800",
    "a\udcff b",
    StrWithBrokenLen("x"),
    float("nan"),
    float("-inf"),
    "y" * 2_000_000,
    {1: 2, (3, 4): 5},
    b"\xff\xfe",
    None,
    "/dev/null",
]


class TestControlFieldsSurvive:
    @pytest.mark.parametrize("value", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
    def test_one_bad_value(self, value: Any, configure_json: Configure) -> None:
        """One offending value never renames the event, re-quotes the severity or drops the
        record; with the *_once path too (main wrote nothing for 10**5000 there)."""
        read = configure_json()
        log = obs.get_logger("comm")
        log.error("workspace_terminal_failure", stage="terminal_failure", v=value, n=None)
        log.error_once("workspace_terminal_failure", stage="terminal_failure", v=value, n=None)
        records = read()
        assert 2 == len(records)
        for r in records:
            assert ("workspace_terminal_failure", "ERROR", 17, "failure") == (
                r["event"],
                r["severity_text"],
                r["severity_number"],
                r["outcome"],
            )
            assert {"rank", "host.name", "code.file.path", "n"} <= set(r)

    def test_many_fields_keep_control_fields(self, configure_json: Configure) -> None:
        """300 fields plus a None keep rank, host.name and code.* (main dropped them)."""
        read = configure_json()
        fields = {f"f{i}": "z" * 2000 for i in range(300)}
        obs.get_logger("t").warning("wide", none=None, **fields)
        record = read()[0]
        assert set(CONTROL_FIELDS) - {"stage", "outcome"} - {
            k for k in CONTROL_FIELDS if k.startswith("exception.")
        } <= set(record)
        assert "truncated" in record

    @FAST
    @given(
        value=st.one_of(
            st.text(),
            st.integers(),
            st.floats(),
            st.binary(),
            st.lists(st.one_of(st.text(), st.floats(), st.none())),
            st.dictionaries(st.one_of(st.text(), st.integers()), st.text()),
        ),
        event=st.text(min_size=1, max_size=50),
    )
    @example(value="", event=":@")  # reads as a URL's empty password: scrubbed, by design
    @example(value="", event="terminal_failure")  # the alert's stage: ERROR at any level
    def test_any_value_any_event(
        self, value: Any, event: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Whatever the value, the line is one JSON object whose event is the event logged,
        as obs writes any text it is given (scrubbed: an event such as ``:@`` reads as a
        URL's password, and the expectation without the scrub failed on it at random)."""
        obs.configure(format="json", sdk_disabled=True)
        obs.get_logger("t").warning(event, v=value)
        lines = capsys.readouterr().err.splitlines()
        assert 1 == len(lines)
        record = json.loads(lines[0])
        level = "ERROR" if alert_stage(event) else "WARNING"  # an alert's name is raised
        assert (scrubbed_text(event), level) == (record["event"], record["severity_text"])
        # The scrub redacts or leaves the event as logged; it never renames it otherwise.
        logged = event.encode("utf-8", "backslashreplace").decode("utf-8")
        assert record["event"] == logged or REDACTED in record["event"]

    def test_renderer_alone_keeps_event_on_overflow(self) -> None:
        """The renderer on its own: a line over MAX_LINE keeps event/severity unquoted."""
        ed = {
            "event": "workspace_terminal_failure",
            "severity_text": "ERROR",
            **{f"f{i}": "q" * 20_000 for i in range(100)},
        }
        out = json.loads(JSONRenderer()(None, "error", ed))
        assert ("workspace_terminal_failure", "ERROR") == (out["event"], out["severity_text"])


class TestForgery:
    def test_bound_and_initial_event(self, configure_json: Configure) -> None:
        """bind(event=) and get_logger(event=) never rename the event (they did on main)."""
        read = configure_json()
        obs.get_logger("t").bind(event="forged", severity_text="DEBUG").error("real")
        obs.get_logger("t", event="forged", rank=99).info("real2")
        records = read()
        assert [("real", "forged", "ERROR"), ("real2", "forged", "INFO")] == [
            (r["event"], r["user.event"], r["severity_text"]) for r in records
        ]
        assert (0, 99) == (records[1]["rank"], records[1]["user.rank"])

    def test_contextvar_outcome(self, configure_json: Configure) -> None:
        """bind_contextvars(outcome="success") never makes a terminal failure a success."""
        read = configure_json()
        structlog.contextvars.bind_contextvars(outcome="success", event="ctx")
        try:
            obs.get_logger("t").error("workspace_terminal_failure", stage="terminal_failure")
        finally:
            structlog.contextvars.clear_contextvars()
        record = read()[0]
        assert ("failure", "success", "workspace_terminal_failure") == (
            record["outcome"],
            record["user.outcome"],
            record["event"],
        )

    def test_fallback_writer_uses_the_records_level(
        self, configure_json: Configure, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """When a processor fails, the fallback line says ERROR for an ERROR, whatever the
        caller passed as severity_text/timestamp."""
        read = configure_json()
        runtime = STATE.runtime
        assert runtime is not None

        def broken(logger: object, method: str, event_dict: dict[str, Any]) -> Any:
            raise RuntimeError("processor down")

        runtime.processors = (broken, *runtime.processors)
        obs.get_logger("t").error("boom", severity_text="DEBUG", timestamp="1970")
        records = read()
        assert ("boom", "ERROR", 17) == (
            records[0]["event"],
            records[0]["severity_text"],
            records[0]["severity_number"],
        )
        assert records[0]["timestamp"].endswith("Z")
        assert "1970" == records[0]["user.timestamp"]


class TestStageBeforeLevel:
    def test_every_api_path(
        self, configure_json: Configure, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A terminal failure logged at DEBUG is an ERROR and written at the default INFO level;
        an attempt_failed logged at INFO is a WARNING at OBS_LEVEL=WARNING; an attempt logged
        at INFO is DEBUG and filtered (all three failed on main)."""
        read = configure_json(level="WARNING")
        log = obs.get_logger("t")
        log.debug("t1", stage="terminal_failure")
        log.debug_once("t2", stage="terminal_failure")
        log.info("f1", stage="attempt_failed")
        log.info_once("f2", stage="attempt_failed")
        log.info("a1", stage="attempt")
        log.warning("a2", stage="attempt")
        logging.getLogger("lib").warning("s1", extra={"stage": "terminal_failure"})
        logging.getLogger("lib").warning("s2", extra={"stage": "attempt"})
        from obs.events import ChainTerminalFailure, emit

        fields = {f.name: None for f in dataclasses.fields(ChainTerminalFailure)}
        emit(ChainTerminalFailure(**{**fields, "chain": "x"}))
        got = [(r["event"], r["severity_text"]) for r in read()]
        assert [
            ("t1", "ERROR"),
            ("t2", "ERROR"),
            ("f1", "WARNING"),
            ("f2", "WARNING"),
            ("s1", "ERROR"),
            ("chain_terminal_failure", "ERROR"),
        ] == got


class TestSmaller:
    def test_obs_file_mode_0600(self, tmp_path: Path) -> None:
        """A new OBS_FILE is created 0600 (main: 0644); an existing one keeps its mode."""
        new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
        old.write_text("")
        old.chmod(0o644)
        for path in (new, old):
            obs.configure(format="json", file=str(path), sdk_disabled=True)
            obs.get_logger("t").info("x")
        assert (0o600, 0o644) == (
            stat.S_IMODE(new.stat().st_mode),
            stat.S_IMODE(old.stat().st_mode),
        )

    def test_float_level_gives_int_severity(self, configure_json: Configure) -> None:
        """log(25.5, ...) writes an int severity_number (main wrote a float)."""
        read = configure_json()
        obs.get_logger("t").log(25.5, "odd_level")  # type: ignore[arg-type]
        record = read()[0]
        assert int is type(record["severity_number"])

    def test_numpy_scalars_are_numbers(self, configure_json: Configure) -> None:
        """numpy scalars are written as numbers (main: "np.float32(0.5)")."""
        np = pytest.importorskip("numpy")
        read = configure_json()
        obs.get_logger("t").info("np", f=np.float32(0.5), i=np.int64(3), b=np.bool_(True))
        record = read()[0]
        assert (0.5, 3, True) == (record["f"], record["i"], record["b"])

    @pytest.mark.parametrize(
        ("argument", "value"),
        [("every_n", 0), ("every_n", -1), ("every_seconds", float("nan")), ("every_n", "x")],
    )
    def test_bad_throttle_argument(
        self, argument: str, value: Any, configure_json: Configure
    ) -> None:
        """A bad every_n/every_seconds never raises, logs every call, and is reported once."""
        read = configure_json()
        for _ in range(3):
            obs.get_logger("t").warning("throttled", **{argument: value})
        records = read()
        errors = [r for r in records if r["event"] == "obs_internal_error"]
        assert 3 == sum(r["event"] == "throttled" for r in records)
        assert 1 == len(errors)
        assert argument in errors[0]["error_message"]

    def test_unhashable_once_key_and_broken_scope(self, configure_json: Configure) -> None:
        """An unhashable once_key or a scope whose __eq__ raises still dedups."""

        class BadEq:
            def __eq__(self, other: object) -> bool:
                raise RuntimeError("eq")

            __hash__ = object.__hash__

        read = configure_json()
        log = obs.get_logger("t")
        for _ in range(3):
            log.warning_once("k1", once_key=[["a"], {"b": 1}])
            log.warning_once("k2", scope=BadEq())
        # The scope is not a scope: logged on every rank, and reported once.
        assert ["k1", "k2", "obs_internal_error"] == [r["event"] for r in read()]

    def test_positional_args(self, configure_json: Configure) -> None:
        """log.info("msg %s", arg) formats the body and keeps the template as the event."""
        read = configure_json()
        log = obs.get_logger("t")
        log.info("loaded %s in %.1f s", "llama", 2.25)
        log.warning_once("rank %d slow", 3)
        log.warning_once("rank %d slow", 4)
        log.warning_once("rank %d slow", 4)
        log.info("bad %d", "x")
        got = [(r["event"], r["body"]) for r in read()]
        assert [
            ("loaded %s in %.1f s", "loaded llama in 2.2 s"),
            ("rank %d slow", "rank 3 slow"),
            ("rank %d slow", "rank 4 slow"),
            ("bad %d", "'bad %d' % ('x',) (formatting failed: TypeError)"),
        ] == got


class TestReentrantInProcess:
    def test_repr_that_logs(self, configure_json: Configure) -> None:
        """A value whose __repr__ logs: its record is written after the outer one."""
        read = configure_json()
        log = obs.get_logger("t")

        class Chatty:
            def __repr__(self) -> str:
                log.warning("from_repr")
                return "<chatty>"

        log.info("outer", v=Chatty())
        assert [("outer", "<chatty>"), ("from_repr", None)] == [
            (r["event"], r.get("v")) for r in read()
        ]


def test_stream_none_is_file_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OBS_STREAM=none writes nothing to the console and everything to the file."""
    path = tmp_path / "only.jsonl"
    os.environ["OBS_STREAM"] = "none"
    try:
        obs.configure(format="json", file=str(path), sdk_disabled=True)
    finally:
        del os.environ["OBS_STREAM"]
    obs.get_logger("t").warning("file_only")
    assert ("", ["file_only"]) == (
        capsys.readouterr().err,
        [json.loads(x)["event"] for x in path.read_text().splitlines()],
    )


#: What may never reach a terminal raw: C0/C1 controls, DEL, line separators, bidi controls.
UNSAFE = {
    *map(chr, (*range(32), *range(127, 160), 0x2028, 0x2029, 0x061C, 0x200E, 0x200F)),
    *map(chr, (*range(0x202A, 0x202F), *range(0x2066, 0x206A))),
}
HOSTILE_TEXT = st.text(
    st.sampled_from([*sorted(UNSAFE), "a", "=", " ", "é", "\U0001f600"]), max_size=40
)


class TestConsoleAndLineEscaping:
    @FAST
    @given(event=HOSTILE_TEXT, key=HOSTILE_TEXT, value=HOSTILE_TEXT)
    def test_console_line_is_one_line_with_nothing_raw(
        self, event: str, key: str, value: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Console format: whatever text an event, body, key or value holds, the event is one
        line with no raw control or bidi character (ESC, BEL and U+202E passed raw on main)."""
        obs.configure(format="console", sdk_disabled=True, repeat_summary_seconds=0)
        capsys.readouterr()
        log = obs.get_logger("t")
        log.warning(event or "e", body=value, **{key or "k": value, "timestamp": value})
        out = capsys.readouterr().err
        assert out.endswith("\n")
        assert 1 == out.count("\n"), out
        assert not UNSAFE & set(out[:-1]), out

    @FAST
    @given(value=HOSTILE_TEXT)
    def test_json_line_escapes_breaks_and_bidi(
        self, value: str, configure_json: Configure, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """JSON lines: NEL, U+2028/9 and bidi controls are written escaped (U+202E passed raw
        on main), and the value reads back unchanged."""
        read = configure_json()
        obs.get_logger("t").warning("e", v=value)
        raw = capsys.readouterr().err
        assert not UNSAFE & set(raw[:-1]), raw
        assert value == json.loads(raw)["v"]
        read()


class _BadKey:
    """An ``extra`` key whose __str__ raises."""

    def __hash__(self) -> int:
        return 1

    def __str__(self) -> str:
        raise RuntimeError("no str")


class TestOddStdlibRecords:
    @pytest.mark.parametrize("created", [float("nan"), float("inf"), "x", 10.0**20])
    def test_bad_created_keeps_level_and_message(
        self, created: Any, configure_json: Configure
    ) -> None:
        """A hand-made record with a bad ``created`` is written at its level with its
        message (a03ec0c wrote obs_unbridgeable_record at INFO with no body)."""
        read = configure_json()
        record = logging.makeLogRecord(
            {"msg": "job_failed", "levelno": 40, "levelname": "ERROR", "name": "lib"}
        )
        record.created = created
        logging.getLogger("lib").handle(record)
        (line,) = read()
        assert ("job_failed", "ERROR", "job_failed") == (
            line["event"],
            line["severity_text"],
            line["body"],
        )

    def test_extra_key_whose_str_raises(self, configure_json: Configure) -> None:
        """An ``extra`` key that cannot be turned into text is shown by repr; the record
        keeps its event and level."""
        read = configure_json()
        logging.getLogger("lib").error("job_failed2", extra={_BadKey(): 1})
        (line,) = read()
        assert ("job_failed2", "ERROR") == (line["event"], line["severity_text"])


class TestFitLine:
    @FAST
    @given(
        event=st.text(max_size=300),
        fields=st.dictionaries(st.text(max_size=40), st.text(max_size=3000), max_size=20),
        trace=st.text(max_size=20000),
    )
    def test_any_event_fits_a_pipe_write(
        self, event: str, fields: dict[str, str], trace: str
    ) -> None:
        """fit_line: one JSON object of at most PIPE_LINE_MAX bytes with its control fields,
        whatever the record holds."""
        from obs.render import PIPE_LINE_MAX, fit_line

        ed: dict[str, Any] = {"timestamp": "T", "severity_text": "ERROR", "severity_number": 17}
        # User fields never carry a control name by the time a line is fitted (the chain
        # renames them user.*), so the generated ones do not either.
        user = {k: v for k, v in fields.items() if k not in CONTROL_SET}
        ed |= {"event": event, "logger": "l", "rank": 3, "exception.stacktrace": trace, **user}
        line = fit_line(ed)
        assert len(line) <= PIPE_LINE_MAX
        record = json.loads(line)
        assert ("ERROR", 17, 3) == (
            record["severity_text"],
            record["severity_number"],
            record["rank"],
        )
        assert isinstance(record["event"], str)
        assert "PIPE_BUF" in record["truncated"]


class TestAdversarialRound2:
    """Found by an independent adversarial pass after the first hardening commit."""

    def test_summary_dedup_key_scrubbed(self, configure_json: Configure) -> None:
        """URL passwords and bearer tokens in once-keyed values never reach a summary."""
        read = configure_json()
        log = obs.get_logger("s")
        for _ in range(3):
            log.warning_once("bear", hdr=f"Bearer {SECRET}a")
            log.warning_once(f"http://u:{SECRET}@h/x")
            log.warning_once("f", v={"u": f"http://u:{SECRET}@h"})
            log.warning_once("wo4 %s", f"http://u:{SECRET}@h")
        obs.flush()
        summaries = [r for r in read() if r["event"] == "log_repeats_suppressed"]
        assert 4 == len(summaries)
        assert SECRET not in json.dumps(summaries)

    @pytest.mark.parametrize(
        "text",
        [
            f"http://user:p@ss{SECRET}@127.0.0.1:9",
            f"exporting logs to user:{SECRET}@127.0.0.1:9",
            f"http://user:{SECRET}/x@h:9",
            f"Namespace(model='llama', hf_token='{SECRET}')",
            f"password: {SECRET}, x=1",
            f'{{"api_key": "{SECRET}"}}',
        ],
    )
    def test_scrub_text(self, text: str) -> None:
        """Credentials in text: URL userinfo with or without a scheme, passwords holding
        ``@`` or ``/``, secret-named ``name=value`` pairs."""
        from obs.encode import scrub_text

        assert SECRET not in scrub_text(text)

    @pytest.mark.parametrize(
        "url",
        [f"user:{SECRET}@127.0.0.1:9", f"http://us er:{SECRET}@h:9", f"http://user:{SECRET} @h:9"],
    )
    def test_refused_endpoint_never_quoted(self, url: str) -> None:
        """A refused endpoint URL's password is not in the ConfigError."""
        with pytest.raises(ConfigError) as info:
            obs.configure(otlp_endpoint=url, logs_exporter="otlp")
        assert SECRET not in str(info.value)

    def test_namespace_args_and_long_keys(self, configure_json: Configure) -> None:
        """argparse/SimpleNamespace values and %s-formatted bodies are scrubbed; a long
        key's end decides whether it is secret."""
        import argparse
        import types

        read = configure_json()
        args = argparse.Namespace(model="llama", hf_token=SECRET, api_key=SECRET)
        log = obs.get_logger("app")
        log.info("args_parsed", args=args, ns=types.SimpleNamespace(password=SECRET))
        log.info("args_parsed %s", args)
        log.info("long", **{"x" * 300 + "_token": SECRET, "a" * 255 + "_api_key": SECRET})
        text = json.dumps(read())
        assert "args_parsed" in text
        assert SECRET not in text

    def test_emit_owns_its_stage_and_name(self, configure_json: Configure) -> None:
        """obs.emit: a stage= or field keyword never overrides the event class (a terminal
        failure stays an ERROR with outcome=failure); event= never raises."""
        from comm.events import WorkspaceTerminalFailure

        read = configure_json()
        ev = WorkspaceTerminalFailure(
            chain="fi_ar", backends_tried="mnnvl", reasons="x", last_error_type="E",
            last_error_message="m", hint="h", backends_skipped="", skip_reasons="",
            duration_ms=1.0,
        )  # fmt: skip
        obs.emit(ev, stage="attempt")
        obs.emit(ev, stage="recovered", chain="forged")
        obs.emit(ev, event="x")
        records = read()
        assert 3 == len(records)
        for r in records:
            assert (r["event"], r["severity_text"], r["stage"], r["outcome"], r["chain"]) == (
                "workspace_terminal_failure", "ERROR", "terminal_failure", "failure", "fi_ar"
            )  # fmt: skip

    @pytest.mark.parametrize(
        ("template", "arg"),
        [("seen %s", list(range(10**6))), ("e %s", "x" * 5_000_000), ("e %100000000s", "x")],
    )
    def test_positional_args_are_bounded(
        self, template: str, arg: Any, configure_json: Configure
    ) -> None:
        """A huge positional argument or width never builds a huge body (the line stays
        bounded, the event intact)."""
        read = configure_json()
        for _ in range(2):
            obs.get_logger("t").warning_once(template, arg)
        (record,) = read()
        assert template == record["event"]
        assert len(json.dumps(record)) < 64 * 1024

    def test_fifo_and_huge_placeholder_are_config_errors(self, tmp_path: Path) -> None:
        """OBS_FILE naming a FIFO with no reader, or a placeholder with a huge width, is a
        ConfigError at once (they hung)."""
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        for path in (str(fifo), str(tmp_path / "{rank:>999999999}")):
            with pytest.raises(ConfigError, match="file"):
                obs.configure(sdk_disabled=True, file=path)


class TestTextSecrets:
    """Secrets in text obs writes: positional arguments, URLs, %-mappings, exceptions."""

    def test_dropin_positional_args_not_in_dedup_key(self, configure_json: Configure) -> None:
        """vLLM's ``warning_once(msg, *args)``: a positional argument the body redacts is
        redacted in the summary's ``dedup_key`` too (it showed ``0=<secret>``)."""
        read = configure_json()
        logger = obs.stdlib.init_logger("vllm.x")
        for _ in range(3):
            logger.warning_once("login with password=%s", SECRET)
            logger.info_once("token %s and %s", "x", f"Bearer {SECRET}xyz")
        obs.flush()
        records = read()
        summaries = [r for r in records if r["event"] == "log_repeats_suppressed"]
        assert 2 == len(summaries)
        assert SECRET not in json.dumps(records)

    @pytest.mark.parametrize("fmt", ["json", "console"])
    def test_url_password_and_bearer_in_any_text(
        self, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A URL password or bearer token in a field value (top level, nested, bound), an
        event name or a stdlib message without arguments reaches no sink: stream (JSON or
        console), OBS_FILE, or what the export sink is handed (they all went out raw)."""
        import obs.testing

        url = f"https://bob:{SECRET}@db.example/x"
        obs.configure(format=fmt, sdk_disabled=True, file=str(tmp_path / "f.jsonl"))
        log = obs.get_logger("t")
        with obs.testing.capture_events() as events:
            for _ in range(2):  # the second call may take the fused path
                log.info("db_connect", url=url)
                log.info("sent", note=f"Authorization was Bearer {SECRET}xyz")
            log.info(f"connecting to {url}")  # noqa: G004 - the event itself holds it
            log.info("cfg", cfg={"endpoints": [url]}, pair=(1, url))
            log.bind(endpoint=url).info("bound")
            logging.getLogger("vllm.x").warning(f"connecting to {url}")  # noqa: G004 - no args
            logging.getLogger("vllm.x").warning("connecting to %s (%s)", url, "x")
            obs.flush()
        out = capsys.readouterr()
        assert 9 == len(events)
        assert [] == [e for e in events if SECRET in repr(e)]
        assert SECRET not in out.err + out.out
        assert SECRET not in (tmp_path / "f.jsonl").read_text()
        assert "https://bob:[REDACTED]@db.example/x" in (tmp_path / "f.jsonl").read_text()

    @FAST
    @given(
        scheme=st.sampled_from(["https://", "postgres+psycopg://", "redis://", ""]),
        user=st.from_regex(r"[A-Za-z0-9._-]{0,8}", fullmatch=True),
        tail=st.text(
            alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="'\"<>"),
            max_size=8,
        ),
        around=st.tuples(st.text(max_size=10), st.text(max_size=10)),
        bearer=st.booleans(),
        route=st.sampled_from(["value", "event", "nested", "stdlib", "bound"]),
    )
    def test_credential_anywhere_never_written(  # noqa: PLR0917 - one per part
        self,
        scheme: str,
        user: str,
        tail: str,
        around: tuple[str, str],
        bearer: bool,
        route: str,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """Whatever surrounds it, a URL password (any scheme or none, a password holding
        ``@``, ``/`` or ``:``) or a bearer token in any text a record carries is not
        written."""
        secret = f"Bearer {SECRET}" if bearer else f"{scheme}{user}:{SECRET}{tail}@db.example"
        text = f"{around[0]} {secret} {around[1]}"
        obs.configure(format="json", sdk_disabled=True)
        log = obs.get_logger("t")
        for _ in range(2):
            if route == "value":
                log.info("connect", url=text)
            elif route == "event":
                log.info(text)
            elif route == "nested":
                log.info("connect", cfg={"urls": [text]})
            elif route == "bound":
                log.bind(url=text).info("connect")
            else:
                logging.getLogger("vllm.t").warning(text)
        out = capsys.readouterr().err
        assert SECRET not in out
        assert 2 == len(out.splitlines())

    def test_percent_mapping_secret_keys(self, configure_json: Configure) -> None:
        """``msg % mapping``: a value under a secret-looking key, at the top or nested in a
        value the format shows, is redacted in the body (it was formatted verbatim)."""
        read = configure_json()
        cfg = {"user": "u", "auth": {"api_key": [SECRET, SECRET]}}
        logging.getLogger("x").warning("login %(password)s ok", {"password": SECRET})
        obs.get_logger("t").warning("login %(api_key)s ok", {"api_key": SECRET})
        obs.get_logger("t").warning("cfg %(cfg)s", {"cfg": cfg})
        obs.get_logger("t").warning("n %(passwordCount)d", {"passwordCount": 3})
        records = read()
        assert ["login [REDACTED] ok", "login [REDACTED] ok"] == [r["body"] for r in records[:2]]
        assert SECRET not in json.dumps(records)

    @FAST
    @given(
        key=st.sampled_from(SECRET_KEYS),
        spec=st.sampled_from(["%(k)s", "%(k)r", "%(k)d", "%(other)s", "%(k)s %(other)s"]),
        nested=st.booleans(),
    )
    def test_percent_mapping_any_key_and_spec(self, key: str, spec: str, nested: bool) -> None:
        """Whatever the secret key's spelling, the conversion (one that fails included),
        and whether the secret sits at the top or one container down, the body hides it."""
        from obs._format import format_body

        inner = {key: SECRET}
        mapping: dict[str, Any] = {key: SECRET, "other": inner, "k": [inner]}
        template = spec.replace("(k)", f"({key})") if not nested else spec
        assert SECRET not in format_body(template, (mapping,))

    @pytest.mark.parametrize(
        "text",
        [
            f"GET /repos failed; Authorization: token {SECRET}",
            f"Proxy-Authorization: Basic realm {SECRET}\nnext line",
            f"headers={{'Authorization': 'token {SECRET}'}}",
            f"Namespace(auth=token {SECRET})",
        ],
    )
    def test_authorization_value_to_its_end(self, text: str) -> None:
        """An authorization-like name's whole value (a scheme, then the credential) is
        redacted, not just its first word (``Authorization: [REDACTED] <secret>``)."""
        from obs.encode import scrub_text

        assert SECRET not in scrub_text(text)
        assert "next line" in scrub_text(text) or "next line" not in text

    @pytest.mark.parametrize("cut", [4096, MAX_STR_LIMIT])
    def test_credential_across_a_cut(self, cut: int, configure_json: Configure) -> None:
        """A URL whose ``@`` falls just past a cut (an exception message's 4096 chars in
        the stack trace, MAX_STR in the message) is scrubbed before the cut."""
        read = configure_json()
        url = f"https://bob:{SECRET}@db.example/x"
        error = ConnectionError("x" * (cut - url.index("@")) + url)
        obs.get_logger("t").error("db_failed", exc_info=error)
        record = read()[0]
        assert SECRET not in json.dumps(record)

    @FAST
    @given(
        name=st.sampled_from(["Authorization", "proxy-authorization", "X-Auth", "auth"]),
        sep=st.sampled_from([": ", "=", "': '", ":\t"]),
        scheme=st.from_regex(r"[A-Za-z]{0,10}( [A-Za-z]{1,6})?", fullmatch=True),
        end=st.sampled_from(["", "\n", ", x=1", "; y", ")", "'}"]),
    )
    def test_authorization_any_scheme(self, name: str, sep: str, scheme: str, end: str) -> None:
        """Whatever the scheme words before it, the credential after an authorization-like
        name is never left in text, and what follows its field stays."""
        from obs.encode import scrub_text

        text = f"{name}{sep}{scheme} {SECRET}{end}"
        assert SECRET not in scrub_text(text)
        assert scrub_text(text).endswith(end.rstrip("'}"))
