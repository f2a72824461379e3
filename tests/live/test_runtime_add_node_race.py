"""A node added to a running live runtime from another thread no longer stops its loop.

`add_node` put the new slot into the runtime's dict of slots in the caller's thread while the
loop thread went through that dict on every turn (the earliest timer). A thread switch in the
middle of that walk raised "dictionary changed size during iteration" on the loop thread: a
harness error that stopped the runtime, and the caller's next call failed with "runtime stopped
before the call ran". One fresh-clone CI run failed `test_runtime_stop_abort` so (its second
half adds ten nodes to a running runtime a hundred times). The loop now walks a tuple that
`add_node` replaces, never changes.

The child passes the GIL between threads every 10 us, so the walk is cut often: the old code
failed 4 runs of 4, each within half a second."""

from __future__ import annotations

import pytest

from tests.live.test_runtime_disconnect import child

pytestmark = pytest.mark.live

ADDS_WHILE_RUNNING = """
import sys
sys.setswitchinterval(1e-5)
from harness.live.runtime import LiveRuntime
from harness.node import BaseNode

class Ticker(BaseNode):
    # a timer always due soon: the loop looks for the earliest timer on every turn
    def start(self, now):
        self.t = now
        return []
    def handle_timer(self, now):
        self.t = now + 200_000
        return []
    def get_timer(self):
        return self.t

rt = LiveRuntime()
for i in range(50):
    rt.add_node(f"t{i}", Ticker, role="t")
rt.start()
try:
    for i in range(300):
        rt.add_node(f"n{i}", BaseNode, role="n")
    print("alive" if rt.running else "stopped")
finally:
    rt.stop()
"""


def test_nodes_added_from_another_thread_while_the_loop_runs_do_not_stop_it() -> None:
    for _ in range(3):
        r = child(ADDS_WHILE_RUNNING, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "alive", (r.returncode, r.stderr[:2000])
