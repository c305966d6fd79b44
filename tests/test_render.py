"""Tests for obs.render: timestamps, one JSON object per line, the console renderer."""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import obs
from obs._fields import CONTROL_SET
from obs.render import (
    CONSOLE_VALUE_MAX,
    EVENT_COLUMN,
    MAX_LINE,
    ConsoleRenderer,
    JSONRenderer,
    ShortPaths,
    TimeStamper,
    _escape_breaks,
    _safe_dict,
    strip_control_keys,
)

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]
NASTY = "line1\nline2\r\n\x00\x1b[31mred\x85nel\u2028ls\u2029ps\ttab\x7f"


def _is_cf(code: int) -> bool:
    import unicodedata

    return unicodedata.category(chr(code)) == "Cf"


ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class TestTimeStamper:
    def test_format(self) -> None:
        """timestamp is ISO 8601 UTC with microseconds and Z; _obs_time_ns is set."""
        out = TimeStamper()(None, "info", {})
        assert (True, int) == (bool(ISO.match(out["timestamp"])), type(out["_obs_time_ns"]))

    def test_existing_time_is_kept(self) -> None:
        """A record that already has _obs_time_ns (a stdlib record) keeps its time."""
        out = TimeStamper()(None, "info", {"_obs_time_ns": 1_700_000_000_123_456_789})
        assert "2023-11-14T22:13:20.123456Z" == out["timestamp"]

    def test_prefix_cache_follows_the_second(self) -> None:
        """The cached per-second prefix is recomputed when the second changes."""
        stamper = TimeStamper()
        first = stamper(None, "info", {"_obs_time_ns": 1_700_000_000_000_000_000})
        second = stamper(None, "info", {"_obs_time_ns": 1_700_000_001_500_000_000})
        assert ("2023-11-14T22:13:20.000000Z", "2023-11-14T22:13:21.500000Z") == (
            first["timestamp"],
            second["timestamp"],
        )

    @given(st.lists(st.integers(0, 253_402_300_799_999_999_999), min_size=1, max_size=20))
    def test_any_sequence_of_times_matches_datetime(self, times: list[int]) -> None:
        """Any times in any order (the cache is per second, so the order matters): each stamp
        is what datetime writes for that microsecond, up to year 9999."""
        stamper = TimeStamper()
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        for ns in times:
            expected = epoch + datetime.timedelta(microseconds=ns // 1000)
            assert expected.strftime("%Y-%m-%dT%H:%M:%S.%fZ") == stamper.stamp(ns)


class TestStripControlKeys:
    def test_strips_obs_keys(self) -> None:
        """The internal _obs_* keys are removed in place; others stay."""
        ed = {"event": "e", "_obs_rank": 1, "_obs_console": True, "_obs_level": 20, "x": 1}
        assert {"event": "e", "x": 1} == strip_control_keys(ed)


class TestJSONRenderer:
    def test_one_object_one_line(self) -> None:
        """Newlines and control characters are escaped: one line, the value round-trips."""
        line = JSONRenderer()(None, "info", {"event": NASTY, "v": NASTY, NASTY: 1})
        assert "\n" not in line
        assert "\r" not in line
        assert {"event": NASTY, "v": NASTY, NASTY: 1} == json.loads(line)

    def test_control_keys_not_rendered(self) -> None:
        """_obs_* keys never reach the output."""
        assert '{"event":"e"}' == JSONRenderer()(None, "info", {"event": "e", "_obs_level": 20})

    def test_nan_and_inf_are_text(self) -> None:
        """NaN/inf (top level and nested) are written as text, never as null or NaN."""
        ed = {"loss": float("nan"), "grad": [float("inf")], "none": None}
        assert {"loss": "nan", "grad": ["inf"], "none": None} == json.loads(JSONRenderer.dumps(ed))

    def test_huge_string_line_is_bounded(self) -> None:
        """A 1 MB string is truncated so the line stays under MAX_LINE."""
        line = JSONRenderer()(None, "info", {"event": "e", "blob": "x" * 1_000_000})
        blob = json.loads(line)["blob"]
        assert (True, True) == (len(line) < MAX_LINE, blob.endswith("...[truncated 983616 chars]"))

    def test_many_large_fields_are_slimmed(self) -> None:
        """Many 16 KiB fields (over MAX_LINE together): the line stays bounded, and every
        field is either written or counted as folded (Loki's size limit, obs.folded)."""
        ed = {f"f{i}": "y" * 20_000 for i in range(40)}
        line = JSONRenderer()(None, "info", ed)
        assert len(line) < MAX_LINE
        out = json.loads(line)
        shown = [k for k in out if k.startswith("f")]
        assert 40 == len(shown) + out["obs.folded_fields"]

    def test_unencodable_values_fall_back(self) -> None:
        """Big ints, cycles and tuple keys make orjson fail; the sanitised copy is written."""
        cycle: list[Any] = []
        cycle.append(cycle)
        ed = {"big": 2**80, "cycle": cycle, "k": {(1, 2): "t"}}
        assert {"big": str(2**80), "cycle": ["<recursion>"], "k": {"(1, 2)": "t"}} == json.loads(
            JSONRenderer()(None, "info", ed)
        )

    def test_non_str_top_level_keys(self) -> None:
        """Non-str keys orjson accepts (ints) are written as strings."""
        assert {"1": "a", "event": "e"} == json.loads(JSONRenderer.dumps({1: "a", "event": "e"}))


def _pad(text: str) -> str:
    return text.ljust(EVENT_COLUMN)


class TestConsoleRenderer:
    def test_layout(self) -> None:
        """``time LEVEL event  body (padded)  k=v  logger (file:line)`` for one process."""
        ed = {
            "timestamp": "T",
            "severity_text": "INFO",
            "event": "engine_started",
            "body": "Engine started",
            "logger": "eng",
            "rank": 0,
            "world_size": 1,
            "model": "llama",
            "n": 2,
            "code.file.path": "app.py",
            "code.line.number": 7,
        }
        head = _pad("engine_started  Engine started")
        assert f"T  INFO      {head}  model=llama n=2  eng (app.py:7)" == (
            ConsoleRenderer()(None, "info", ed)
        )

    def test_pairs_line_up(self) -> None:
        """Events of different lengths: the key=value pairs start in the same column."""
        lines = [
            ConsoleRenderer()(
                None, "info", {"timestamp": "T", "severity_text": "INFO", "event": name, "k": 1}
            )
            for name in ("a", "workspace_initialized", "x" * 12)
        ]
        assert 1 == len({line.index("k=1") for line in lines}), lines

    def test_stdlib_record_shows_the_message_once(self) -> None:
        """A stdlib record (event = template, body = message) shows the message only."""
        ed = {"timestamp": "T", "severity_text": "INFO", "event": "Loading %s (%d)"}
        ed["body"] = "Loading llama (3)"
        line = ConsoleRenderer()(None, "info", ed)
        assert "T  INFO      Loading llama (3)" == line.rstrip()
        assert "%s" not in line

    def test_rank_prefix_in_a_job(self) -> None:
        """With world_size > 1 the line shows [rRANK/nNODE]."""
        ed = {"timestamp": "T", "severity_text": "WARNING", "event": "e", "rank": 5}
        ed |= {"node_rank": 1, "world_size": 8}
        assert "T  WARNING   [r5/n1]  e" == ConsoleRenderer()(None, "warning", ed)

    def test_body_equal_to_event_is_not_repeated(self) -> None:
        """A body that is the event name is not printed twice."""
        ed = {"timestamp": "T", "severity_text": "INFO", "event": "e", "body": "e"}
        assert "T  INFO      e" == ConsoleRenderer()(None, "info", ed)

    def test_control_characters_never_start_a_line(self) -> None:
        """Event, body, keys, values and the location cannot produce a second line."""
        ed = {
            "timestamp": "T",
            "severity_text": "INFO",
            "event": NASTY,
            "body": NASTY,
            NASTY: NASTY,
            "code.file.path": "a\nb.py",
            "code.line.number": 1,
        }
        line = ConsoleRenderer()(None, "info", ed)
        assert [line] == line.splitlines()
        assert "\x1b" not in line

    def test_non_str_values(self) -> None:
        """Containers are shown as JSON; long values are cut for the console."""
        ed = {"timestamp": "T", "severity_text": "INFO", "event": "e", "l": [1, "a"]}
        ed["s"] = "z" * 2000
        line = ConsoleRenderer()(None, "info", ed)
        assert f'T  INFO      {_pad("e")}  l=[1,"a"] s={"z" * CONSOLE_VALUE_MAX}...' == line

    def test_stacktrace_lines_are_indented(self) -> None:
        """The traceback follows on indented lines, so no line can pass for a new record."""
        ed = {
            "timestamp": "T",
            "severity_text": "ERROR",
            "severity_number": 17,
            "event": "failed",
            "exception.type": "ValueError",
            "exception.message": "a\nb",
            "exception.stacktrace": "Traceback:\n  File x\nValueError: a\nb\x85c\n",
        }
        first, *rest = ConsoleRenderer()(None, "error", ed).split("\n")
        pairs = "exception.type=ValueError exception.message=a\\nb"
        assert f"T  ERROR     {_pad('failed')}  {pairs}" == first
        assert ["    Traceback:", "      File x", "    ValueError: a", "    b", "    c"] == rest

    @pytest.mark.parametrize(
        ("level", "number", "policy", "lines"),
        [
            ("WARNING", 13, "error", 1),  # an expected fallback: one line
            ("ERROR", 17, "error", 3),
            ("WARNING", 13, "always", 3),
            ("CRITICAL", 21, "never", 1),
        ],
    )
    def test_tracebacks_only_for_errors_unless_asked(
        self, level: str, number: int, policy: str, lines: int
    ) -> None:
        """OBS_CONSOLE_TRACEBACKS: error (default) shows the stack for ERROR and above only;
        always / never. The exception type and message stay on the line."""
        ed = {"timestamp": "T", "severity_text": level, "severity_number": number}
        ed |= {"event": "e", "exception.type": "RuntimeError"}
        ed["exception.stacktrace"] = "Traceback:\nRuntimeError: x"
        out = ConsoleRenderer(tracebacks=policy)(None, "warning", ed)
        assert lines == len(out.split("\n"))
        assert "exception.type=RuntimeError" in out.split("\n")[0]

    def test_colors(self) -> None:
        """With colors: dim time, level colour, bold event, cyan keys, magenta values,
        blue logger."""
        ed = {"timestamp": "T", "severity_text": "ERROR", "event": "e", "k": 1, "logger": "lg"}
        line = ConsoleRenderer(colors=True)(None, "error", ed)
        assert line.startswith("\x1b[2mT\x1b[0m  \x1b[31;1mERROR   \x1b[0m  \x1b[1me\x1b[0m")
        assert "\x1b[36mk\x1b[0m=\x1b[35m1\x1b[0m" in line
        assert line.endswith("\x1b[34mlg\x1b[0m")

    def test_paths_are_short(self, tmp_path: Any) -> None:
        """Paths under the working directory are relative; library paths start at their
        package (site-packages stripped); others stay absolute."""
        import structlog

        paths = ShortPaths(str(tmp_path))
        assert "pkg/app.py" == paths(str(tmp_path / "pkg" / "app.py"))
        assert "structlog/__init__.py" == paths(structlog.__file__ or "")
        assert "/elsewhere/x.py" == paths("/elsewhere/x.py")


class TestInTheChain:
    @pytest.mark.parametrize("fmt", ["json", "console"])
    def test_nasty_values_make_one_line(self, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
        """A newline-laden event and fields produce exactly one output line per call."""
        obs.configure(format=fmt, sdk_disabled=True)
        log = obs.get_logger("t")
        log.info(NASTY, v=NASTY, **{NASTY: NASTY})
        log.warning("second", body=NASTY)
        err = capsys.readouterr().err
        assert 2 == err.count("\n")

    def test_json_record_shape(self, configure_json: Configure) -> None:
        """A JSON line has the DESIGN.md keys in the DESIGN.md order."""
        read = configure_json()
        obs.get_logger("comm.fi").error(
            "workspace_terminal_failure", body="unavailable", chain="fi_ar"
        )
        (record,) = read()
        assert [
            "timestamp",
            "severity_text",
            "severity_number",
            "event",
            "body",
            "logger",
        ] == list(record)[:6]
        # An ERROR call of the alert's event is its stage (DESIGN's example has both).
        assert {
            "stage",
            "outcome",
            "rank",
            "local_rank",
            "world_size",
            "node_rank",
            "host.name",
            "code.file.path",
            "code.line.number",
            "code.function.name",
            "chain",
        } == set(record) - set(list(record)[:6])
        assert ("unavailable", "ERROR", 17, bool(ISO.match(record["timestamp"]))) == (
            record["body"],
            record["severity_text"],
            record["severity_number"],
            True,
        )

    def test_console_format_in_chain(self, capsys: pytest.CaptureFixture[str]) -> None:
        """format="console" writes the readable layout, without colors off a tty."""
        obs.configure(format="console", sdk_disabled=True)
        obs.get_logger("t").warning("disk_low", free_gb=3)
        line = capsys.readouterr().err
        assert re.match(
            r"^\S+Z  WARNING   disk_low {22}  free_gb=3  t \(tests/test_render\.py:\d+\)\n$", line
        )

    def test_auto_is_json_off_a_tty(self, capsys: pytest.CaptureFixture[str]) -> None:
        """format="auto" writes JSON when the stream is not a tty (as under pytest)."""
        obs.configure(format="auto", sdk_disabled=True)
        obs.get_logger("t").info("auto_mode")
        assert "auto_mode" == json.loads(capsys.readouterr().err)["event"]

    def test_exc_info_in_json(self, configure_json: Configure) -> None:
        """log.exception writes exception.type/message/stacktrace in the JSON line."""
        read = configure_json()
        try:
            {}["k"]
        except KeyError:
            obs.get_logger("t").exception("lookup_failed")
        (record,) = read()
        assert ("KeyError", "'k'", True) == (
            record["exception.type"],
            record["exception.message"],
            "Traceback (most recent call last)" in record["exception.stacktrace"],
        )


class TestInvisibleCharacters:
    """Format characters (category Cf: zero-width spaces and joiners, the soft hyphen, the
    byte-order mark, bidi controls, tag characters) are invisible on a terminal, so a value
    holding them could read as something else; the console shows them escaped."""

    def test_the_table_is_every_format_character(self) -> None:
        """INVISIBLE covers the Unicode Cf category of this Python's unicodedata."""
        import sys
        import unicodedata

        from obs.render import INVISIBLE

        expected = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
        assert set() == expected - set(INVISIBLE)

    @given(st.sampled_from(sorted(c for c in range(0x110000) if _is_cf(c))))
    def test_console_escapes_each_one(self, code: int) -> None:
        """A format character in the event, the body or a value comes out as \\uXXXX."""
        renderer = ConsoleRenderer(colors=False)
        ch = chr(code)
        line = renderer(
            None, "info", {"event": f"a{ch}b", "body": f"c{ch}d", "v": f"e{ch}f", "w": [ch]}
        )
        assert ch not in line
        escaped = f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
        assert 3 <= line.count(escaped)


@given(
    st.dictionaries(
        # names Loki stores: a long line with another one is folded (tests/test_loki_lines.py)
        st.text(min_size=1, max_size=8).filter(
            lambda k: k not in CONTROL_SET and re.search("[A-Za-z0-9]", k) is not None
        ),
        st.one_of(st.none(), st.floats(), st.integers(-(2**40), 2**40), st.just("/dev/null")),
        max_size=6,
    ),
    st.sampled_from([0, 1000, 2040, 2100, 12_000]),  # under MAX_STR: the redactor cuts longer
)
def test_null_fast_path_matches_safe_copy(fields: dict[str, object], pad: int) -> None:
    """A ``null`` in the output (None, NaN, inf, the text "/dev/null") gives the bytes the
    safe copy gives: the float check after a null never lets NaN/inf through as null. On
    short and long lines alike (a long line's text is not scanned, its floats are)."""
    ed = {"event": "e", "pad": "x" * pad, **fields}
    expect = _escape_breaks(orjson.dumps(_safe_dict(ed, None)))
    assert JSONRenderer.dumps(ed) == expect
