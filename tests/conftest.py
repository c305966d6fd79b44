"""Shared fixtures: every test starts from an unconfigured obs and a clean environment."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _children import COVERAGE_VAR
from hypothesis import HealthCheck, settings

import obs
import obs.testing
from obs._config import STATE

#: Launcher variables the rank resolver reads: a CI job running under SLURM or torchrun
#: must not change what the tests see.
_LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "NO_COLOR",
)
_LAUNCHER_PREFIXES = ("OBS_", "OTEL_", "SLURM_", "OMPI_")


#: No per-example deadline and no "too slow" health check: on a loaded 2-core CI machine
#: under coverage an example's time says nothing about the code. ``HYPOTHESIS_PROFILE=ci``
#: (set by .ci/run) also derandomizes: CI runs the examples a clean clone ran before it
#: was submitted, while ``make test`` elsewhere keeps exploring.
settings.register_profile(
    "obs", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("ci", settings.get_profile("obs"), derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "obs"))


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest process (each xdist worker too) and the children it starts get a
    ``$TMPDIR`` of their own, removed at the end: the default spool and probe folders live
    there, and two runs sharing them replay each other's records and prune each other's
    runs. ``tmp_path`` stays where pytest keeps it."""
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    private = tempfile.mkdtemp(prefix="obs-tests-")
    os.environ["TMPDIR"] = private
    tempfile.tempdir = None  # gettempdir() cached the shared one
    config.add_cleanup(lambda: shutil.rmtree(private, ignore_errors=True))


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A collector URL on loopback whose port accepts TCP connections and never answers
    (each export hangs for its whole timeout)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
    finally:
        s.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``vllm`` need the real vLLM package: skipped without it, unless
    ``OBS_REQUIRE_VLLM=1`` (``make`` sets it after installing vLLM), when they run and fail."""
    if importlib.util.find_spec("vllm") is not None or os.environ.get("OBS_REQUIRE_VLLM") == "1":
        return
    skip = pytest.mark.skip(reason="needs vllm==0.33.0 (make installs it; see the Makefile)")
    for item in items:
        if item.get_closest_marker("vllm") is not None:
            item.add_marker(skip)


@pytest.fixture
def untraced_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """The children this test starts with ``os.environ`` run without coverage's tracer
    (see ``_children``); this process stays measured."""
    monkeypatch.delenv(COVERAGE_VAR, raising=False)


@pytest.fixture(autouse=True)
def _obs_isolation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clear obs/OTel/launcher env vars, and reset obs and the root logger after the test."""
    for name in list(os.environ):
        if name.startswith(_LAUNCHER_PREFIXES) or name in _LAUNCHER_VARS:
            monkeypatch.delenv(name)
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        obs.testing.reset()
        root.setLevel(level)
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)


class FakeSink:
    """An export-sink stand-in: records the event dicts it receives, control keys included."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.flushed = 0
        self.closed = 0

    def __call__(self, logger: object, method_name: str, event_dict: dict[str, Any]) -> Any:
        self.received.append(dict(event_dict))
        return event_dict

    def force_flush(self, timeout: float) -> bool:
        self.flushed += 1
        return True

    def shutdown(self, timeout: float) -> bool:
        self.closed += 1
        return True


@pytest.fixture
def fake_sink(monkeypatch: pytest.MonkeyPatch) -> FakeSink:
    """Make ``obs.configure()`` put a :class:`FakeSink` in the chain as its export sink."""
    sink = FakeSink()
    monkeypatch.setattr(STATE, "sink_factory", lambda settings, resolver, report: sink)
    return sink


def parse_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as one strict JSON object (NaN/Infinity are not JSON)."""

    def reject(constant: str) -> Any:
        raise ValueError(f"non-JSON constant {constant}")

    out = []
    for line in text.splitlines():
        value = json.loads(line, parse_constant=reject)
        assert isinstance(value, dict)
        out.append(value)
    return out


@pytest.fixture
def configure_json(
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., Callable[[], list[dict[str, Any]]]]:
    """``configure_json(**kw)`` configures JSON lines on stderr without OTel export and
    returns a function that parses (and consumes) what was written to stderr so far."""

    def setup(**overrides: Any) -> Callable[[], list[dict[str, Any]]]:
        overrides.setdefault("format", "json")
        overrides.setdefault("sdk_disabled", True)
        overrides.setdefault("repeat_summary_seconds", 0)
        obs.configure(**overrides)
        capsys.readouterr()

        def read() -> list[dict[str, Any]]:
            return parse_lines(capsys.readouterr().err)

        return read

    return setup


@pytest.fixture
def json_lines() -> Callable[[str], list[dict[str, Any]]]:
    """The strict JSON-lines parser, for tests that read files or captured output."""
    return parse_lines
