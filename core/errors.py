"""Exception types that map onto the CLI's exit codes.

Exit codes are part of the user contract: 0 ok, 1 runtime failure, 2 usage or input error.  Code that
detects bad input raises :class:`InputError` with a message that names the file, the field and the
allowed values; the CLI turns it into exit code 2 without a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class KernelpilotError(Exception):
    """Base class for errors kernelpilot reports to the user without a traceback."""

    exit_code = EXIT_RUNTIME


class InputError(KernelpilotError):
    """Bad user input: a file, a field, a flag or a setting with a value we cannot accept."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.message = message  # without the place, for callers that name the place more precisely
        where = ", ".join(p for p in (f"file {file}" if file else "", f"field {field}" if field else "") if p)
        super().__init__(f"{where}: {message}" if where else message)


class NoLibraryDefaultError(InputError):
    """The library has no default config for this problem (e.g. an attention head dim its examples do not
    build).  An input error where a default is asked for by name; a tuner instead takes the model's best
    legal config as its baseline and says so in the report."""


class ToolMissingError(KernelpilotError):
    """A required external tool (compiler, headers, GPU) is not available on this machine."""

    exit_code = EXIT_RUNTIME


class StoreError(InputError):
    """A results, replay or trial store that is corrupt, of another schema version, or not a store.

    A usage error (exit 2): the user points at another file or moves the damaged one aside; nothing
    is created or overwritten in its place."""


def validation_lines(exc: object, data: object = None) -> list[str]:
    """Every error of a pydantic ``ValidationError`` as ``field: message`` lines (not just the first).

    An unknown key reads as ``unknown key`` and a wrong literal shows the value given, so a typo such
    as ``dimz`` is reported as itself rather than as the field it should have been."""
    lines = []
    for err in exc.errors():  # type: ignore[attr-defined]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown key"
        elif err.get("type") == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        lines.append(f"{loc}: {msg}")
    return lines
