"""The ``kernelpilot`` command line.

Subcommands live in their own modules and are listed in :data:`COMMANDS`; a command module only
imports light modules at top level (argparse configuration) and does its heavy imports inside
``run``, so ``kernelpilot --help`` stays instant.  Exit codes: 0 ok, 1 runtime failure, 2 usage or
input error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from kernelpilot import __version__
from kernelpilot.errors import EXIT_RUNTIME, EXIT_USAGE, KernelpilotError
from kernelpilot.proc import install_interrupt_handlers, stop_all
from kernelpilot.secrets import RedactingStream

# name -> (module, one-line help).  Other features add their command here.
COMMANDS: dict[str, tuple[str, str]] = {
    "plugins": ("kernelpilot.cli.plugins_cmd", "list discovered plugins, their hooks and availability"),
    "doctor": ("kernelpilot.cli.doctor_cmd", "check GPUs, compilers, headers and LLM configuration"),
    "new-dsl": ("kernelpilot.cli.new_dsl_cmd", "scaffold a pip-installable DSL plugin package"),
    "check-tiles": (
        "kernelpilot.cli.check_tiles_cmd",
        "check tile configs against a target's hardware model",
    ),
    "space": ("kernelpilot.cli.space_cmd", "legal tile-space size and the cost model's best configs"),
    "tune": (
        "kernelpilot.cli.tune_cmd",
        "tile-tune CUTLASS kernels: propose, check, build, benchmark, report",
    ),
    "cache": (
        "kernelpilot.cli.cache_cmd",
        "verify or clean the build cache (checksums, leftovers, failures)",
    ),
    "report": (
        "kernelpilot.cli.report_cmd",
        "re-render tables, CSV and plots of a tuning run from its RUN.json",
    ),
    "export": (
        "kernelpilot.cli.export_cmd",
        "export tuned kernels as a library: CMake project, PyTorch ops, C++ dispatch",
    ),
    "optimize": (
        "kernelpilot.cli.optimize_cmd",
        "optimize a kernel: verified multi-stage pipeline (rules/llm/claude)",
    ),
    "skill": (
        "kernelpilot.cli.skill_cmd",
        "verified steps for agents: analyze, validate, benchmark, profile, trial",
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse exits with 2 on usage errors already; keep that and print a short hint."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelpilot",
        description="Tile tuning of CUTLASS kernels and a multi-DSL kernel optimization pipeline.",
    )
    parser.add_argument("--version", action="version", version=f"kernelpilot {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        cmd_parser = sub.add_parser(name, help=help_text, description=module.__doc__)
        module.configure(cmd_parser)
        cmd_parser.set_defaults(_module=module_name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # litellm fetches a price map from the network at import unless told not to; we never want that.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    module = importlib.import_module(args._module)
    restore = install_interrupt_handlers()  # Ctrl-C / SIGTERM: child process trees are killed at once
    # every line printed (progress, errors, --json) goes through the secret redaction
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        return int(module.run(args) or 0)
    except KernelpilotError as exc:
        print(f"kernelpilot {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        stop_all()
        print(f"kernelpilot {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_RUNTIME
    finally:
        sys.stdout, sys.stderr = streams
        restore()


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
