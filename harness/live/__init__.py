"""The live transport: the same sans-IO nodes over real pyzmq sockets, and the supervisor for
implementations under test.

    harness.live.runtime     LiveRuntime: nodes over pyzmq in one event-loop thread
    harness.live.standalone  run_standalone: one node as a foreground process (prints READY)
    harness.live.supervisor  ManagedProcess / Supervisor: start, wait-ready, stop, always reap
    harness.live.sockets     SocketSpec -> configured pyzmq socket
    harness.live.output      bounded capture of a child's stdout/stderr

Import the submodules directly; this package imports nothing so that the supervisor can be
used without loading pyzmq and pyarrow.
"""
