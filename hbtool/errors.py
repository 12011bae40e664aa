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
