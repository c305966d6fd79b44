"""Tests for obs.encode: safe values (tensors, broken reprs, cycles), redaction, exc_info."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from _keys import OddKey as _OddKey
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import obs
import obs.encode
import obs.testing
from obs._config import STATE
from obs._redactor import Redactor
from obs.encode import (
    FLAT,
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_KEY,
    MAX_STR,
    REDACTED,
    format_exception,
    json_default,
    safe_repr,
    scrub_text,
    to_jsonable,
    to_otel_value,
)
from obs.otel.records import RecordBuilder

Configure = Callable[..., Callable[[], list[dict[str, Any]]]]


@pytest.fixture(scope="module")
def torch() -> Any:
    """torch, imported when a test needs it (collecting this module stays light)."""
    import torch as module

    return module


class BrokenRepr:
    """An object whose __repr__ raises."""

    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


class NonStrRepr:
    """An object whose __repr__ returns a non-str."""

    def __repr__(self) -> Any:
        return 42


class BadMapping(Mapping[str, int]):
    """A mapping whose iteration raises."""

    def __getitem__(self, key: str) -> int:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no iteration")

    def __len__(self) -> int:
        return 1


class BrokenStrError(Exception):
    """An exception whose __str__ raises."""

    def __str__(self) -> str:
        raise RuntimeError("str is broken")


def _raise(exc: BaseException) -> None:
    raise exc


class TestSafeRepr:
    def test_tensor_is_data_free(self, torch: Any) -> None:
        """A big tensor is summarised by shape/dtype/device, never its data."""
        text = safe_repr(torch.zeros(1000, 1000))
        assert "Tensor(shape=[1000, 1000], dtype=torch.float32, device=cpu)" == text

    def test_parameter_is_data_free(self, torch: Any) -> None:
        """A torch.nn.Parameter (a Tensor subclass) is summarised too."""
        text = safe_repr(torch.nn.Parameter(torch.ones(3, 2)))
        assert "Parameter(shape=[3, 2], dtype=torch.float32, device=cpu)" == text

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (lambda t: t.bfloat16, "torch.bfloat16"),
            (lambda t: t.device("cpu"), "cpu"),
            (lambda t: t.Size([2, 3]), "torch.Size([2, 3])"),
        ],
    )
    def test_torch_small_objects(
        self, value: Callable[[Any], object], expected: str, torch: Any
    ) -> None:
        """dtypes, devices and sizes render as their short str."""
        assert expected == safe_repr(value(torch))

    def test_process_group(self, tmp_path: Path, torch: Any) -> None:
        """A ProcessGroup renders as its rank and size."""
        import torch.distributed as dist

        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
        )
        try:
            text = safe_repr(dist.group.WORLD)
        finally:
            dist.destroy_process_group()
        assert "<ProcessGroup rank=0 size=1>" == text

    def test_broken_repr(self) -> None:
        """A raising __repr__ becomes a placeholder naming the type and the error."""
        assert "<unrepresentable BrokenRepr object: RuntimeError>" == safe_repr(BrokenRepr())

    def test_non_str_repr(self) -> None:
        """A __repr__ returning a non-str never raises."""
        assert "<unrepresentable NonStrRepr object: TypeError>" == safe_repr(NonStrRepr())

    def test_limit(self) -> None:
        """A long repr is cut at the limit with a note of how much was dropped."""
        assert "'aaaaaaa...[truncated 94 chars]" == safe_repr("a" * 100, 8)


class TestToJsonable:
    def test_recursive_list(self) -> None:
        """A list containing itself renders the cycle as "<recursion>"."""
        value: list[Any] = [1]
        value.append(value)
        assert [1, "<recursion>"] == to_jsonable(value)

    def test_recursive_dict(self) -> None:
        """A dict containing itself renders the cycle as "<recursion>"."""
        value: dict[str, Any] = {"a": 1}
        value["self"] = value
        assert {"a": 1, "self": "<recursion>"} == to_jsonable(value)

    def test_shared_not_recursive(self) -> None:
        """The same list twice (not a cycle) is rendered twice."""
        shared = [1]
        assert [[1], [1]] == to_jsonable([shared, shared])

    def test_non_str_keys(self) -> None:
        """Keys become strings (ints, tuples, None, objects)."""
        assert {"1": "a", "(1, 2)": "b", "None": "c"} == to_jsonable(
            {1: "a", (1, 2): "b", None: "c"}
        )

    def test_bytes(self) -> None:
        """bytes decode as UTF-8 with backslash escapes for invalid bytes."""
        assert ["ok", "\\xff\\xfe"] == to_jsonable([b"ok", b"\xff\xfe"])

    def test_huge_string_is_truncated(self) -> None:
        """A string over MAX_STR keeps MAX_STR chars and says how many were dropped."""
        text = to_jsonable("x" * (MAX_STR + 500))
        assert ("x" * MAX_STR + "...[truncated 500 chars]") == text

    def test_big_int_is_text(self) -> None:
        """An int beyond int64 becomes its decimal string; int64 stays an int."""
        assert [str(2**70), 2**63 - 1, -(2**63)] == to_jsonable([2**70, 2**63 - 1, -(2**63)])

    def test_non_finite_floats_are_text(self) -> None:
        """NaN and +-inf (not JSON) become "nan"/"inf"/"-inf"."""
        assert ["nan", "inf", "-inf", 1.5] == to_jsonable(
            [float("nan"), float("inf"), float("-inf"), 1.5]
        )

    def test_sets_are_sorted_lists(self) -> None:
        """A set becomes a list in a stable order."""
        assert [1, 2, 3] == to_jsonable({3, 1, 2})

    def test_tuples_are_lists(self) -> None:
        """A tuple becomes a list."""
        assert [1, [2, 3]] == to_jsonable((1, (2, 3)))

    def test_item_limit(self) -> None:
        """Containers are cut at MAX_ITEMS with a note."""
        out = to_jsonable(list(range(MAX_ITEMS + 10)))
        assert (MAX_ITEMS + 1, "... 10 more items") == (len(out), out[-1])

    def test_dict_item_limit(self) -> None:
        """Mappings are cut at MAX_ITEMS with a "..." entry."""
        out = to_jsonable({f"k{i}": i for i in range(MAX_ITEMS + 3)})
        assert (MAX_ITEMS + 1, "3 more items") == (len(out), out["..."])

    def test_depth_limit(self) -> None:
        """Nesting deeper than MAX_DEPTH is rendered as a repr string."""
        value: Any = "leaf"
        for _ in range(MAX_DEPTH + 2):
            value = [value]
        out = to_jsonable(value)
        for _ in range(MAX_DEPTH):
            out = out[0]
        assert "[['leaf']]" == out

    def test_exceptions_tensors_objects(self, torch: Any) -> None:
        """Exceptions, tensors and broken objects become safe strings."""
        assert [
            "ValueError: bad",
            "Tensor(shape=[2], dtype=torch.int64, device=cpu)",
            "<unrepresentable BrokenRepr object: RuntimeError>",
        ] == to_jsonable([ValueError("bad"), torch.tensor([1, 2]), BrokenRepr()])

    def test_broken_exception_str(self) -> None:
        """An exception whose __str__ raises still renders (from its message argument)."""
        assert "BrokenStrError: x" == to_jsonable(BrokenStrError("x"))

    def test_mapping_that_raises(self) -> None:
        """A mapping whose iteration raises is rendered by its safe repr."""
        assert to_jsonable(BadMapping()).startswith("<test_encode.BadMapping object at 0x")

    def test_scalars_pass_through(self) -> None:
        """str, int, float, bool and None are returned as they are."""
        assert ["s", 1, 1.5, True, None] == to_jsonable(["s", 1, 1.5, True, None])


class TestToOtelValue:
    def test_scalars_fast_path(self) -> None:
        """str/bool/float/int64 come back as the same objects."""
        values = ["s", True, 2.5, 7]
        assert values == [to_otel_value(v) for v in values]

    def test_nested(self, torch: Any) -> None:
        """Nested containers become lists and str-keyed dicts, tensors become strings."""
        assert {"t": "Tensor(shape=[1], dtype=torch.float32, device=cpu)", "l": [1, "2"]} == (
            to_otel_value({"t": torch.zeros(1), "l": (1, "2")})
        )

    def test_big_int_and_none(self) -> None:
        """A big int becomes text; None stays None (the sink drops it)."""
        assert [str(2**64), None] == to_otel_value([2**64, None])

    @pytest.mark.parametrize(
        ("value", "expected"), [(float("nan"), "nan"), (float("inf"), "inf"), (-1e400, "-inf")]
    )
    def test_non_finite_floats_are_text(self, value: float, expected: str) -> None:
        """NaN/inf export as the same strings the JSON line shows."""
        assert expected == to_otel_value(value)

    def test_finite_float_is_kept(self) -> None:
        """A finite float passes through as the same object."""
        value = 0.1
        assert value is to_otel_value(value)


class TestJsonDefault:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ({2, 1}, [1, 2]),
            (frozenset({"a"}), ["a"]),
            (ValueError("v"), "ValueError: v"),
            (b"\xffx", "\\xffx"),
            (lambda t: t.float32, "torch.float32"),
            (BrokenRepr(), "<unrepresentable BrokenRepr object: RuntimeError>"),
        ],
    )
    def test_default_hook(self, value: object, expected: object, torch: Any) -> None:
        """orjson's default= hook turns what orjson cannot encode into JSON values."""
        assert expected == json_default(value(torch) if callable(value) else value)


class TestFormatException:
    def test_exc_info_true(self) -> None:
        """exc_info=True inside an except block describes the exception being handled."""
        try:
            _raise(KeyError("missing"))
        except KeyError:
            fields = format_exception(True)
        assert fields is not None
        assert ("KeyError", "'missing'") == (fields["exception.type"], fields["exception.message"])
        assert "in _raise" in fields["exception.stacktrace"]
        assert fields["exception.stacktrace"].startswith("Traceback (most recent call last):")

    def test_exception_instance(self) -> None:
        """An exception object gives its own traceback."""
        try:
            _raise(ValueError("bad value"))
        except ValueError as exc:
            error = exc
        fields = format_exception(error)
        assert ("ValueError", "bad value") == (
            fields["exception.type"],  # type: ignore[index]
            fields["exception.message"],  # type: ignore[index]
        )

    def test_three_tuple(self) -> None:
        """A (type, value, traceback) tuple is accepted."""
        exc = RuntimeError("t")
        assert {
            "exception.type": "RuntimeError",
            "exception.message": "t",
            "exception.stacktrace": "RuntimeError: t\n",
        } == format_exception((RuntimeError, exc, None))

    def test_module_qualified_type(self) -> None:
        """A non-builtin exception type is named with its module."""
        fields = format_exception(BrokenStrError("x"))
        assert "test_encode.BrokenStrError" == fields["exception.type"]  # type: ignore[index]

    def test_multi_arg_message(self) -> None:
        """An exception with several args has its str() as the message, without the type."""
        fields = format_exception(OSError(2, "No such file"))
        assert ("FileNotFoundError", "[Errno 2] No such file") == (
            fields["exception.type"],  # type: ignore[index]
            fields["exception.message"],  # type: ignore[index]
        )

    @pytest.mark.parametrize("value", [None, False, "text", 3, (1, 2, 3)])
    def test_not_an_exception(self, value: object) -> None:
        """Values that describe no exception give None."""
        assert None is format_exception(value)

    def test_true_outside_except(self) -> None:
        """exc_info=True with no exception being handled gives None."""
        assert None is format_exception(True)

    def test_broken_str(self) -> None:
        """An exception whose __str__ raises is still described."""
        fields = format_exception(BrokenStrError("x"))
        assert "x" == fields["exception.message"]  # type: ignore[index]


class _Shouting(str):
    """A str subclass whose __str__ says something else."""

    __slots__ = ()

    def __str__(self) -> str:
        return "SHOUT"


class TestRedactor:
    @pytest.mark.parametrize(
        "key",
        [
            "authorization",
            "Authorization",
            "token",
            "hf_token",
            "access-token",
            "password",
            "db_passwd",
            "client_secret",
            "api_key",
            "X-Api-Key",
            "apikey",
            "headers",
            "otlp_headers",
            "cookie",
            "aws_credentials",
            "private_key",
            "basic_auth",
            "bearer",
        ],
    )
    def test_secret_keys_are_redacted(self, key: str) -> None:
        """Secret-looking field names have their value replaced."""
        assert {key: REDACTED, "event": "e"} == Redactor()(
            None, "info", {key: "s3cr3t", "event": "e"}
        )

    @pytest.mark.parametrize(
        "key",
        [
            "max_token_num",
            "num_tokens",
            "token_count",
            "tokenizer",
            "tokens",
            "header_size",
            "author",
        ],
    )
    def test_similar_keys_stay(self, key: str) -> None:
        """Names that only contain a secret word elsewhere (max_token_num) are kept."""
        assert {key: 8192} == Redactor()(None, "info", {key: 8192})

    def test_nested_one_level(self) -> None:
        """A dict field has its secret-looking keys redacted at every depth; the caller's dict
        is untouched."""
        config = {"api_key": "k", "model": "llama", "inner": {"password": "p"}}
        out = Redactor()(None, "info", {"config": config})
        assert {
            "config": {"api_key": REDACTED, "model": "llama", "inner": {"password": REDACTED}}
        } == out
        assert "k" == config["api_key"]

    def test_nested_headers_dict(self) -> None:
        """``headers={...}`` is redacted as a whole."""
        assert {"headers": REDACTED} == Redactor()(None, "info", {"headers": {"x-team": "a"}})

    def test_extra_parts(self) -> None:
        """extra_parts adds more secret words."""
        assert {"session_id": REDACTED} == Redactor(["session"])(None, "info", {"session_id": "x"})

    def test_non_str_nested_keys_are_ignored(self) -> None:
        """Non-str keys inside a nested dict do not break redaction (they become text)."""
        out = Redactor()(None, "info", {"m": {1: "a", "token": "t"}})
        assert {"m": {"1": "a", "token": REDACTED}} == out

    def test_exc_info_becomes_exception_fields(self) -> None:
        """exc_info is popped and replaced by exception.type/message/stacktrace."""
        out = Redactor()(None, "error", {"exc_info": ValueError("v")})
        assert ["exception.message", "exception.stacktrace", "exception.type"] == sorted(out)

    @given(mark=st.one_of(st.booleans(), st.integers(), st.text(), st.builds(object)))
    def test_only_obs_own_flat_mark_skips_the_walk(self, mark: object) -> None:
        """Whatever a caller puts under ``_obs_flat``, nested values are still walked and
        redacted; only obs' own :data:`FLAT` object says "plain scalars, skip the walk"."""
        out = Redactor()(None, "info", {"cfg": {"password": "p"}, "_obs_flat": mark})
        assert {"password": REDACTED} == out["cfg"]
        assert {"n": 1, "_obs_flat": FLAT} == Redactor()(None, "info", {"n": 1, "_obs_flat": FLAT})

    @given(
        keys=st.lists(
            st.one_of(
                st.text(max_size=8),
                st.integers(-3, 3),
                st.sampled_from(["event", "timestamp", "_obs_no_export", "user.event", "1"]),
                st.sampled_from(["event", "severity_text", "_obs_level", "x"]).map(_OddKey),
                st.integers(MAX_KEY - 1, MAX_KEY + 2).map(lambda n: "k" * n),
            ),
            max_size=8,
        )
    )
    def test_a_renamed_key_never_overwrites(self, keys: list[object]) -> None:
        """A key that is not a plain short str (an int, a str subclass with its own hash and
        equality, an over-long name) is written under its bounded text, as user.<text> when
        that is a control or private name or already taken: the event's own fields keep
        their values and no field is lost."""
        event_dict: dict[Any, Any] = {"event": "e", "timestamp": "t", "_obs_level": 40}
        for i, key in enumerate(keys):
            event_dict.setdefault(key, f"v{i}")
        count = len(event_dict)
        out = Redactor()(None, "error", event_dict)
        assert ("e", "t", 40, count) == (
            out["event"],
            out["timestamp"],
            out["_obs_level"],
            len(out),
        )
        assert all(type(k) is str and len(k) <= MAX_KEY + 100 for k in out)  # bounded

    def test_a_str_subclass_key_is_its_exact_text(self) -> None:
        """The key's own __str__ is not asked: its str value names the field (as
        user.<value> when that is a control name)."""
        out = Redactor()(None, "info", {_Shouting("note"): "x", _Shouting("event"): "y"})
        assert {"note": "x", "user.event": "y"} == out

    def test_exc_info_false(self) -> None:
        """exc_info=False adds nothing."""
        assert {} == Redactor()(None, "error", {"exc_info": False})

    def test_in_the_chain(self, configure_json: Configure) -> None:
        """Through obs, secrets are redacted in the JSON line and sizes are kept."""
        read = configure_json()
        obs.get_logger("t").info(
            "request",
            authorization="Bearer abc",
            api_key="k",
            max_token_num=2048,
            num_tokens=7,
            extra={"headers": {"a": 1}, "secret": "s", "ok": 1},
        )
        (record,) = read()
        assert (
            REDACTED,
            REDACTED,
            2048,
            7,
            {"headers": REDACTED, "secret": REDACTED, "ok": 1},
        ) == (
            record["authorization"],
            record["api_key"],
            record["max_token_num"],
            record["num_tokens"],
            record["extra"],
        )


@dataclasses.dataclass
class Config:
    """A dataclass field (orjson encodes these natively)."""

    name: str
    size: int


class TestValuesInTheChain:
    def test_tensor_field(self, configure_json: Configure, torch: Any) -> None:
        """A real tensor field is written as its data-free summary."""
        read = configure_json()
        obs.get_logger("t").info("t", x=torch.ones(512, 512), dtype=torch.float16)
        (record,) = read()
        assert ("Tensor(shape=[512, 512], dtype=torch.float32, device=cpu)", "torch.float16") == (
            record["x"],
            record["dtype"],
        )

    def test_odd_values(self, configure_json: Configure) -> None:
        """Exceptions, broken reprs, bytes, big ints, NaN, cycles and int keys are written."""
        read = configure_json()
        cycle: list[Any] = []
        cycle.append(cycle)
        obs.get_logger("t").info(
            "odd",
            err=ValueError("v"),
            broken=BrokenRepr(),
            raw=b"\x00\xff",
            big=10**30,
            nan=float("nan"),
            cycle=cycle,
            keys={1: "a"},
        )
        (record,) = read()
        assert {
            "err": "ValueError: v",
            "broken": "<unrepresentable BrokenRepr object: RuntimeError>",
            "raw": "\x00\\xff",
            "big": str(10**30),
            "nan": "nan",
            "cycle": ["<recursion>"],
            "keys": {"1": "a"},
        } == {k: record[k] for k in ("err", "broken", "raw", "big", "nan", "cycle", "keys")}

    def test_dataclass_field(self, configure_json: Configure) -> None:
        """A dataclass field is written as an object of its fields (orjson's native form)."""
        read = configure_json()
        obs.get_logger("t").info("cfg", cfg=Config("c", 3))
        assert {"name": "c", "size": 3} == read()[0]["cfg"]


class TestBodyIsText:
    @pytest.mark.parametrize(
        ("entry", "body", "expected"),
        [
            ("kwarg", ["mnnvl", "trtllm"], "['mnnvl', 'trtllm']"),
            ("kwarg", None, "workspace_terminal_failure"),
            ("kwarg", 3, "3"),
            ("kwarg", {"password": "p", "n": 1}, "{'n': 1, 'password': [REDACTED]}"),
            ("stdlib_extra", {"k": 1}, "{'k': 1}"),
            ("stdlib_extra", None, "workspace_terminal_failure"),
        ],
    )
    def test_json_line_and_export_carry_the_same_text(
        self, entry: str, body: object, expected: str, configure_json: Configure, fake_sink: Any
    ) -> None:
        """A body that is not a str is written as one bounded text (a None body as the
        event name), the same in the JSON line and in what the export sink is handed."""
        read = configure_json(sdk_disabled=False)
        if entry == "kwarg":
            obs.get_logger("t").error("workspace_terminal_failure", body=body)
        else:
            logging.getLogger("t").error("workspace_terminal_failure", extra={"body": body})
        (record,) = read()
        (exported,) = [e for e in fake_sink.received if e.get("logger") == "t"]
        assert (expected, expected) == (record["body"], exported["body"])

    @given(
        body=st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(),
            st.text(max_size=20),
            st.integers(MAX_STR - 1, MAX_STR + 1).map(lambda n: "b" * n),
            st.lists(st.text(max_size=5), max_size=4),
            st.dictionaries(st.sampled_from(["k", "token", "n"]), st.integers(), max_size=3),
            st.sampled_from([BrokenRepr(), NonStrRepr(), b"raw", _Shouting("loud")]),
        )
    )
    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    def test_any_body_is_the_same_text_on_both_routes(self, body: object, fake_sink: Any) -> None:
        """Whatever the body, the written line, the export sink's fields and the OTel record
        built from them carry one bounded str."""
        obs.configure(stream="none")
        try:
            with obs.testing.capture_events() as events:
                obs.get_logger("t").error("workspace_terminal_failure", body=body)
            runtime = STATE.runtime
            assert runtime is not None
            builder = RecordBuilder(runtime.settings, runtime.resolver)
        finally:
            obs.testing.reset()
        (line,) = [e for e in events if e["event"] == "workspace_terminal_failure"]
        exported = [e for e in fake_sink.received if e["event"] == line["event"]][-1]
        record = builder.build((0, None, exported), 3).log_record
        assert (str, line["body"], line["body"]) == (
            type(line["body"]),
            exported["body"],
            record.body,
        )
        assert len(line["body"]) <= MAX_STR + 64
        assert "token" not in line["body"] or "[REDACTED]" in line["body"]


class TestScrubText:
    @pytest.mark.parametrize("blank", [" ", "\t", "\n", "\r", "  \t"])
    @pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BASIC", "Basic"])
    def test_bearer_after_any_blank(self, scheme: str, blank: str) -> None:
        """The cheap hint in front of the scheme pattern lets every blank through."""
        assert "abc123secret" not in obs.encode.scrub_credentials(
            f"sent {scheme}{blank}abc123secret to the proxy"
        )

    @pytest.mark.parametrize(
        "text",
        [
            "login with password=[REDACTED]",
            "password=[REDACTED] repeated 2 more times",
            "http://u:[REDACTED]@h/x",
            "sent Bearer [REDACTED] to h",
            "token: [REDACTED], x=1",
        ],
    )
    def test_scrubbed_text_is_kept(self, text: str) -> None:
        """Text already scrubbed comes back as it is (it read ``password=[REDACTED]]``)."""
        assert text == scrub_text(text)

    @settings(max_examples=500, deadline=None)
    @given(
        st.lists(
            st.one_of(
                st.sampled_from(
                    [
                        "password",
                        "token",
                        "api_key",
                        "Authorization",
                        "url",
                        "x",
                        "=",
                        ": ",
                        ":",
                        "@",
                        "://",
                        "http",
                        "Bearer ",
                        "basic ",
                        "[REDACTED]",
                        "'",
                        '"',
                        " ",
                        ",",
                        ";",
                        "]",
                        ")",
                        "/",
                        "\n",
                        "s3cr3t",
                        "abcdef12",
                    ]
                ),
                st.text(max_size=6),
            ),
            max_size=14,
        ).map("".join)
    )
    @example("password://,@")  # the pair's cut left userinfo for the next pass
    def test_idempotent(self, text: str) -> None:
        """Scrubbing scrubbed text changes nothing, whatever the text."""
        once = scrub_text(text)
        assert once == scrub_text(once)

    @pytest.mark.parametrize(
        "make",
        [lambda n: ":" * n + " @", lambda n: "a:" * (n // 2) + " @",
         lambda n: "@" + "x:" * (n // 2), lambda n: "a" * n + "/:x@",
         lambda n: "x:@ " * (n // 4)],
        ids=["colons", "pairs", "at-first", "far-userinfo", "at-runs"],
    )  # fmt: skip
    def test_linear_time(self, make: Callable[[int], str]) -> None:
        """Scrubbing costs one pass over the text (a run of ``:`` and a far ``@`` took most
        of a second at MAX_STR: every start position scanned to the end). A ratio, not a
        time: four times the text costs about four times as much (quadratic: sixteen);
        the fastest of interleaved tries in the thread's CPU time, so a loaded machine
        (waiting for a core) does not decide it."""
        small, large = make(MAX_STR // 4), make(MAX_STR)
        best = {small: math.inf, large: math.inf}
        for _ in range(5):
            for text in (small, large):
                start = time.thread_time()
                scrub_text(text)
                best[text] = min(best[text], time.thread_time() - start)
        assert best[large] < 10 * best[small] + 0.002

    def test_url_passwords(self) -> None:
        """The password of any userinfo, up to its token's last ``@``, is replaced; the
        rest of the text stays."""
        text = "see https://bob:p@ss/w@h:5432/db and u:pw@h, mail a@b, _https://bob:pw@h x:y"
        assert (
            "see https://bob:[REDACTED]@h:5432/db and u:[REDACTED]@h, mail a@b,"
            " _https://bob:[REDACTED]@h x:y"
        ) == scrub_text(text)
