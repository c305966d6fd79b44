"""``python -m comm probe ...``: run the workspace fallback chain on N local ranks."""

from __future__ import annotations

import sys

_USAGE = """usage: python -m comm probe --world-size N [--nodes M] [--backend auto|mnnvl|trtllm]
                            [--max-token-num N] [--hidden-dim N] [--dtype bfloat16]
                            [--otlp-endpoint URL | --embedded-receiver]

  probe   run get_fi_ar_workspace / get_fi_ar_quant_workspace on N ranks and report
          (exit 0 all initialized, 3 terminal failure, 4 records not delivered,
          2 bad usage, 1 probe failed, 130/143 Ctrl-C/SIGTERM);
          --help for every option
"""


def _check_package() -> None:
    """Say so when another distribution owns ``comm/__init__.py`` (Jupyter's ``comm``)."""
    import comm  # noqa: PLC0415
    from comm._packaging import conflict_message  # noqa: PLC0415

    if not hasattr(comm, "get_fi_ar_workspace"):
        message = conflict_message(next(iter(comm.__path__)), ours_is_init=False)
        if message:
            sys.stderr.write(message + "\n")


def main(argv: list[str] | None = None) -> int:
    """Dispatch to the subcommand; 2 on bad usage."""
    _check_package()
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE)
        return 0 if args else 2
    if args[0] == "probe":
        from comm.probe import main as probe_main  # noqa: PLC0415 - keep `import comm` light

        return probe_main(args[1:])
    from obs.cli_text import shown  # noqa: PLC0415 - an error's path only

    sys.stderr.write(f"unknown command {shown(repr(args[0]))}\n{_USAGE}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
