"""The one error hierarchy of hbtool.

Library code raises these (``from`` the underlying cause); only the CLI turns
them into a one-line message on stderr and exit status 2.
"""


class HbtoolError(Exception):
    """Base class: something the user can fix (bad input, bad usage)."""

    exit_code = 2


class TraceFormatError(HbtoolError):
    """A trace file is unreadable: wrong format, corrupted, or truncated beyond use."""


class UnknownFormatError(HbtoolError):
    """No reader recognises the input."""


class InputNotFoundError(HbtoolError):
    """An input path does not exist."""


class TracerNotBuiltError(HbtoolError):
    """The native tracer library is missing."""


def reason(exc: BaseException, limit: int = 200) -> str:
    """An exception's text as one line for a message: its first non-blank line, at most
    `limit` characters (parsers such as pyarrow's and calamine's end theirs with newlines)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
