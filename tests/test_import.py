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
