"""obs.delivery(): the process's own OTLP delivery counters, as the probe reports them."""

from __future__ import annotations

import socket

import obs
from obs._receiver import OTLPReceiver


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TestDelivery:
    def test_counts_what_the_collector_acknowledged(self, otlp_receiver: OTLPReceiver) -> None:
        """After shutdown: every record sent was acknowledged by the real receiver, and the
        endpoint is the URL actually used, without its password."""
        host = otlp_receiver.http_endpoint.split("//", 1)[1].rstrip("/")
        obs.configure(
            format="json", otlp_endpoint=f"http://user:hunter2@{host}", logs_exporter="otlp"
        )
        log = obs.get_logger("t")
        for i in range(5):
            log.warning("w", i=i)
        obs.shutdown(timeout=5)
        d = obs.delivery()
        assert (True, 5, 5, 0, 0) == (
            d["exporting"],
            d["sent"],
            d["acknowledged"],
            d["spooled"],
            d["dropped"],
        )
        assert d["endpoint"].endswith(f"@{host}/v1/logs")
        assert "hunter2" not in d["endpoint"]
        assert 5 == len(otlp_receiver.by_event("w"))

    def test_unreachable_collector_is_not_acknowledged(self, tmp_path: object) -> None:
        """A closed port: WARNING+ sent, none acknowledged, spooled instead."""
        obs.configure(
            format="json",
            otlp_endpoint=f"http://127.0.0.1:{_closed_port()}",
            logs_exporter="otlp",
            spool_dir=str(tmp_path),
            shutdown_timeout=1,
        )
        obs.get_logger("t").error("e")
        obs.shutdown(timeout=1)
        d = obs.delivery()
        assert 0 == d["acknowledged"]
        assert d["sent"] == d["spooled"] >= 1  # the error (and obs' own export report)

    def test_export_off(self) -> None:
        """With export off nothing is counted and ``exporting`` says so."""
        obs.configure(format="json", sdk_disabled=True)
        obs.get_logger("t").error("e")
        assert (False, 0, None) == (
            obs.delivery()["exporting"],
            obs.delivery()["sent"],
            obs.delivery()["endpoint"],
        )


def test_spooled_records_a_replay_delivered_are_told_apart(tmp_path: object) -> None:
    """``spooled`` is cumulative (``sent`` = acknowledged + spooled + ...), so after the
    collector came back and the replay delivered every spooled record, delivery() still
    said ``spooled 4, acknowledged 0`` and nothing else: nothing told the operator they
    had arrived (failed before: no such key). Now ``replay_delivered`` counts them."""
    import time

    with OTLPReceiver() as rx:
        rx.set_fault(http_status=503, fail=True)
        obs.configure(
            format="json",
            stream="none",
            service_name="svc",
            spool_dir=str(tmp_path),
            otlp_endpoint=rx.http_endpoint,
            otlp_protocol="http/protobuf",
            logs_exporter="otlp",
        )
        for i in range(3):
            obs.get_logger("t").error("down", i=i)
        obs.flush(5)
        before = obs.delivery()
        rx.clear_fault()
        for _ in range(200):  # the replay runs on the worker's schedule; a flush asks it
            obs.flush(5)
            if len(rx.by_event("down")) >= 3 and obs.delivery()["replay_delivered"] >= 3:
                break
            time.sleep(0.05)
        after = obs.delivery()
    assert before["sent"] == before["spooled"] >= 3
    assert before["replay_delivered"] == 0
    assert [0, 1, 2] == sorted(r["attributes"]["i"] for r in rx.by_event("down"))
    assert after["spooled"] == before["spooled"]  # what became of them when sent
    assert after["replay_delivered"] >= 3  # ... and that they arrived since
