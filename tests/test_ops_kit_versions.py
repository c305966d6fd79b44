"""The collector version the config names can load the config.

The collector decodes its config strictly: a key a component does not know yet is an
error ("has invalid keys: ..."), and the collector does not start, so nothing is shipped
and no alert can fire. Each key below is used by examples/otel-collector.yaml and was
added to otelcol-contrib after its first release; the minimum version the config's header
names must be at least the release that added it.
"""

from __future__ import annotations

import re
from typing import Any

from test_ops_kit import COLLECTOR, load_yaml

#: (path of the key in the config, first otelcol-contrib minor version that knows it,
#: upstream change that added it).
KEYS_SINCE: tuple[tuple[tuple[str, ...], int, str], ...] = (
    # extension/storage/filestorage Config.CreateDirectory, `create_directory`:
    # open-telemetry/opentelemetry-collector-contrib#34985, opened 2024-09-03, after
    # v0.108.0 (2024-08) was released: first in v0.109.0.
    (("extensions", "file_storage", "create_directory"), 109, "contrib#34985"),
)


def declared_minimum() -> int:
    """The minor version in the header's "otelcol-contrib, v0.NNN or later"."""
    m = re.search(r"otelcol-contrib, v0\.(\d+) or later", COLLECTOR.read_text())
    assert m is not None, "the config's header names no minimum otelcol-contrib version"
    return int(m.group(1))


def lookup(doc: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(doc, dict) or key not in doc:
            return False
        doc = doc[key]
    return True


def test_the_declared_version_knows_every_key_the_config_uses():
    """otelcol-contrib v0.108 rejects file_storage's create_directory (added in v0.109)."""
    doc = load_yaml(COLLECTOR)
    minimum = declared_minimum()
    too_new = {
        ".".join(path): (since, change)
        for path, since, change in KEYS_SINCE
        if lookup(doc, path) and since > minimum
    }
    assert too_new == {}, f"the config says v0.{minimum} or later"


def test_the_table_finds_the_keys():
    """Every key of the table is where the config uses it (a moved key fails here)."""
    doc = load_yaml(COLLECTOR)
    assert [path for path, _, _ in KEYS_SINCE if not lookup(doc, path)] == []
