"""The Dafka commands of bench/chaos_standins.py survive a shell: ``{towers}`` holds ``;`` between
towers, which the ``-sh`` variants' ``sh -c "sleep 1; ..."`` script read as the end of the
command. The two-tower store then ran with only the first tower and none of the arguments after
it (no --bind, no --data-dir): two-stores-two-towers failed complete-delivery ("late lacks 61")
and the tap heard nothing."""

from __future__ import annotations

import subprocess

import pytest

from bench.chaos_standins import DAFKA, command_of
from harness.live.supervisor import fill_placeholders

TOWERS = "tcp://127.0.0.1:1,tcp://127.0.0.1:2;tcp://127.0.0.1:3,tcp://127.0.0.1:4"
VALUES = {"python": "python", "zmq_harness": "zmq-harness", "towers": TOWERS, "bind": "tcp://127.0.0.1:5",
          "advertise": "tcp://127.0.0.1:6", "data_dir": "/tmp/d", "name": "stores.0"}


@pytest.mark.parametrize("variant", ["standin-sh", "independent-sh"])
def test_every_towers_value_reaches_the_program_whole_through_sh(variant: str) -> None:
    for entry in DAFKA:
        if variant.startswith("independent") and not entry.independent:
            continue
        sh, flag, script = fill_placeholders(command_of(entry, variant), VALUES)
        assert (sh, flag) == ("sh", "-c")
        # the program replaced by printf: what sh hands it, one argument a line
        echo = script.replace("sleep 1; ", "").split(" ", 1)[1].split(" ", 1)[1]
        out = subprocess.run(["sh", "-c", "printf '%s\\n' " + echo], capture_output=True, text=True, timeout=10)
        args = out.stdout.splitlines()
        assert out.returncode == 0 and not out.stderr, (entry.id, out.stderr)
        towers = [a for a in args if TOWERS in a]
        assert towers and all(a in (TOWERS, "towers=" + TOWERS) for a in towers), (entry.id, args)
        assert "tcp://127.0.0.1:5" in " ".join(args) or "--two-nodes" in args, (entry.id, args)
