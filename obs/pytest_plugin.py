"""pytest plugin (entry point `obs`): the `otlp_receiver` fixture.

Importing this module is cheap: grpc and protobuf load only when a test asks for the
fixture, so the plugin costs nothing in test runs that do not use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from obs._receiver import OTLPReceiver

__all__ = ["otlp_receiver"]


@pytest.fixture
def otlp_receiver() -> Iterator[OTLPReceiver]:
    """A started OTLPReceiver (gRPC + HTTP on free loopback ports), stopped after the test."""
    from obs._receiver import OTLPReceiver  # noqa: PLC0415 - keep plugin import light

    receiver = OTLPReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
