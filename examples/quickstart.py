"""obs in one screen: configure once, log a fallback-chain story, see dedup and severity.

Run: ``make quickstart`` (or ``.venv/bin/python examples/quickstart.py``). Set
``OBS_FORMAT=json`` for JSON lines, or ``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318``
with ``python -m obs receive`` running to watch the OTLP records arrive.
"""

from __future__ import annotations

import logging

import obs
from obs.stdlib import init_logger


def main() -> None:
    obs.configure()  # kwargs > env (OBS_*, OTEL_*) > defaults
    log = obs.get_logger("quickstart").bind(chain="fi_ar")

    # A fallback chain: attempt (DEBUG) -> attempt_failed (WARNING) -> fallback (WARNING)
    # -> initialized (INFO). Severity follows the stage, whatever level the call used.
    log.info("workspace_attempt", stage="attempt", backend="mnnvl", attempt=1)
    log.info(
        "workspace_attempt_failed",
        stage="attempt_failed",
        backend="mnnvl",
        reason="no_multicast",
        body="mnnvl unavailable (expected on GPUs without NVSwitch)",
    )
    log.info("workspace_fallback", stage="fallback", from_backend="mnnvl", to_backend="trtllm")
    log.info("workspace_initialized", stage="initialized", backend="trtllm", attempts=2)

    # Once per key: logged once, the 9 repeats are counted and summarised at flush.
    for _ in range(10):
        log.warning_once("flag_deprecated", flag="--enable-fusion", scope="local")

    # vLLM-compatible stdlib logger, and a plain stdlib logger, through the same chain.
    vlog = init_logger("vllm.quickstart")
    for step in range(3):
        vlog.warning_once("Falling back to %s for step %d", "trtllm", 0)
        del step
    logging.getLogger("flashinfer").info("plain stdlib records are bridged too")

    # The terminal failure: ERROR whatever the call said, with stage/outcome for alerts.
    log.warning(
        "workspace_terminal_failure",
        stage="terminal_failure",
        backends_tried=["mnnvl", "trtllm"],
        reasons=["no_cuda", "no_cuda"],
        body="FlashInfer allreduce fusion workspace unavailable: tried mnnvl, trtllm",
    )
    obs.flush()
    obs.shutdown()


if __name__ == "__main__":
    main()
