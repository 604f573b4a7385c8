"""``python -m kernelpilot`` runs the CLI."""

from kernelpilot.cli import entry

entry()
