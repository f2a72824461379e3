"""Run the test EchoServer with run_standalone (used by the standalone and supervisor tests).

    python tests/live/standalone_echo.py [--bind tcp://127.0.0.1:*] [--trace PATH]
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository root

from harness.live.standalone import run_standalone  # noqa: E402
from tests.live.live_test_nodes import EchoServer  # noqa: E402

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--bind", default="tcp://127.0.0.1:*")
    p.add_argument("--trace")
    args = p.parse_args()
    sys.exit(run_standalone(EchoServer, name="echo", role="server", config={"bind": args.bind},
                            trace_path=args.trace))
