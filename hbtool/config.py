"""Tunables with their documented defaults (docs/methods.md).

Every threshold, window and cap lives here rather than as a literal in an
analyzer or reader.
"""

#: heart-rate window in beats (SPEC 1): hr_i = w / (t_i - t_{i-w})
HEART_RATE_WINDOW = 10

#: readers: largest metadata block accepted from a binary trace (bytes)
MAX_METADATA_BYTES = 1 << 20
#: readers: largest chunk size accepted from a binary trace header (bytes)
MAX_CHUNK_BYTES = 64 << 20
#: readers: largest legacy text line considered (characters); longer is malformed
MAX_LEGACY_LINE = 4096
#: readers: warnings of one kind printed before they are summarised
MAX_WARNINGS_SHOWN = 10

#: plot: largest number of points drawn per thread (longer curves are decimated)
PLOT_MAX_POINTS = 4000
