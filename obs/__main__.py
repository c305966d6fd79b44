"""``python -m obs``: ``receive`` (a local OTLP sink), ``schema`` (the event registry) and
``spool`` (undelivered records)."""

from __future__ import annotations

import sys

_USAGE = """usage: python -m obs {receive,schema,spool} [options]

  receive   run a local OTLP receiver (gRPC + HTTP) and print what arrives
  schema    print the registered events as Markdown or JSON Schema
  spool     list, replay or purge the records spooled for replay
"""


def main(argv: list[str] | None = None) -> int:
    """Dispatch to the subcommand; 2 on bad usage."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "receive":
        from obs._receive_cli import cli_main  # noqa: PLC0415

        return int(cli_main(rest))
    if command == "schema":
        from obs._schema import cli_schema  # noqa: PLC0415

        return int(cli_schema(rest))
    if command == "spool":
        from obs._spool_cli import cli_spool  # noqa: PLC0415

        return cli_spool(rest)
    from obs.cli_text import shown  # noqa: PLC0415 - an error's path only

    sys.stderr.write(f"unknown command {shown(repr(command))}\n{_USAGE}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
