"""hbtool: offline trace analyzer for parallel programs, with a native tracer.

Library use::

    from hbtool.io import read_heartbeats
    trace = read_heartbeats("sample_traces/jacobi-normal")
"""

__version__ = "0.1.0"
