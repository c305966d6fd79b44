"""Tests that importing obs stays light: no torch, flashinfer, OTel SDK exporters or grpc."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "flashinfer", "grpc", "opentelemetry.sdk", "opentelemetry.exporter")

PROBE = """
import json, sys
{imports}
heavy = {heavy!r}
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print(json.dumps(loaded))
"""


def _loaded_after(imports: str) -> list[str]:
    code = PROBE.format(imports=imports, heavy=HEAVY)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


class TestImportIsLight:
    @pytest.mark.parametrize(
        "imports",
        [
            "import obs",
            "import obs.testing",
            "import obs.stdlib, obs.rank, obs.encode, obs.render, obs.dedup, obs.scope",
            "import obs; obs.get_logger('x')",
        ],
    )
    def test_no_heavy_modules(self, imports: str) -> None:
        """The import pulls in none of torch, flashinfer, grpc or the OTel SDK/exporters."""
        assert [] == _loaded_after(imports)

    def test_logging_before_configure_stays_light(self) -> None:
        """A log call before configure() (the lazy default runtime) imports nothing heavy."""
        imports = "import obs, io, contextlib\nwith contextlib.redirect_stderr(io.StringIO()):\n"
        imports += "    obs.get_logger('x').warning_once('w')"
        assert [] == _loaded_after(imports)

    def test_probe_sees_heavy_imports(self) -> None:
        """The probe itself works: importing grpc shows up as loaded."""
        assert "grpc" in _loaded_after("import grpc")


class TestImportIsLazy:
    """Issue 15: ``import obs`` took as long as structlog plus the OTel logs SDK, most of it
    ``structlog.stdlib`` (asyncio, ssl) and orjson; they now load on first use. This
    failed on the commit before (structlog, asyncio, ssl and orjson were loaded)."""

    def test_import_obs_loads_no_structlog_orjson_or_asyncio(self) -> None:
        """What ``import obs`` itself adds to sys.modules (a coverage run's own imports, made
        before, do not count)."""
        code = (
            "import json, sys\nbefore = set(sys.modules)\nimport obs\n"
            "added = set(sys.modules) - before\n"
            "print(json.dumps(sorted(m for m in ('structlog', 'asyncio', 'ssl', 'orjson',"
            " 'socket', 'tempfile', 'obs._runtime') if m in added)))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        assert [] == json.loads(out.stdout.strip().splitlines()[-1])

    def test_the_first_log_call_loads_what_it_needs(self) -> None:
        """Laziness costs nothing in behaviour: a log call right after import writes its line."""
        code = "import obs\nobs.get_logger('x').warning('first_line', n=1)"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        assert "first_line" in out.stderr

    def test_drop_event_is_structlogs(self) -> None:
        """obs.errors.DropEvent is structlog's class: users' structlog chains catch what obs'
        processors raise."""
        import structlog

        from obs import errors

        assert errors.DropEvent is structlog.DropEvent
        with pytest.raises(AttributeError):
            _ = errors.NoSuchThing  # type: ignore[attr-defined]

    def test_context_prefix_is_structlogs(self) -> None:
        """The context-variable prefix obs spells out is the one structlog binds with."""
        import structlog.contextvars

        from obs.context import STRUCTLOG_KEY_PREFIX

        assert structlog.contextvars.STRUCTLOG_KEY_PREFIX == STRUCTLOG_KEY_PREFIX
