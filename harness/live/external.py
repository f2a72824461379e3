"""An implementation under test that runs as a process, seen by the live runtime as a node:
crash = SIGKILL to its process group, restart = the same command line again (its data
directory is its own and survives), pause/resume = SIGSTOP/SIGCONT.

A restart waits for the process to be ready again (its readiness check), which can take
seconds; it runs in a thread of its own so that the runtime's loop keeps serving the other
nodes meanwhile. Every process started here is reaped by `ManagedProcess`.
"""

from __future__ import annotations

import signal
import threading

from harness.live.supervisor import ManagedProcess, SupervisorError

SHELL_SIGNAL_BASE = 128  # a shell reports a child killed by signal N as status 128 + N


def describe_exit(code: int | None) -> str:
    """How a process ended, for a verdict: "status 3", "signal SIGSEGV (11)", or a shell's
    128 + N read as the signal it stands for."""
    if code is None:
        return "still running"
    if code < 0:
        return f"signal {_signal_name(-code)} ({-code})"
    if SHELL_SIGNAL_BASE < code < SHELL_SIGNAL_BASE + 65:
        return f"status {code} (128 + {code - SHELL_SIGNAL_BASE}: {_signal_name(code - SHELL_SIGNAL_BASE)} in a shell)"
    return f"status {code}"


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


class ExternalNode:
    def __init__(self, process: ManagedProcess, role: str, implementation: str = "external") -> None:
        self.process = process
        self.role = role
        self.implementation = implementation
        self.restart_errors: list[str] = []
        self._restarting: threading.Thread | None = None
        # True while the harness has it down on purpose (a crash fault, a restart under way),
        # so that its exit is not taken for a crash of its own.
        self.down_on_purpose = False
        self._kills = 0  # crash faults so far: a restart they cut short did not fail

    @property
    def running(self) -> bool:
        return self.process.running

    @property
    def exited_by_itself(self) -> bool:
        """It was started, is not running, and the harness did not stop it."""
        return self.process.pid is not None and not self.down_on_purpose and not self.process.running

    def kill(self) -> str:
        """SIGKILL and reap; says how it ended."""
        self.down_on_purpose = True
        self._kills += 1
        code = self.process.kill()
        return f"exit status {code}"

    def restart_in_background(self) -> None:
        self.down_on_purpose = True
        kills = self._kills
        previous = self._restarting

        def restart() -> None:
            if previous is not None:
                # One restart at a time: a second one (two faults' restart_after falling close
                # together) stopped the process the first was still starting, and the first
                # counted that as a restart that failed.
                previous.join()
                self.down_on_purpose = True
            try:
                self.process.restart(grace=0.5)
                self.down_on_purpose = False
            except SupervisorError as exc:  # it did not come back: its peers will notice
                if self._kills == kills:  # not a crash fault of the scenario that struck while it started
                    self.restart_errors.append(str(exc))

        self._restarting = threading.Thread(target=restart, name=f"restart-{self.process.name}", daemon=True)
        self._restarting.start()

    def pause(self) -> None:
        self.process.pause()

    def resume(self) -> None:
        self.process.resume()

    def wait_restarted(self, timeout: float) -> None:
        if self._restarting is not None:
            self._restarting.join(timeout)
