"""An implementation under test that runs as a process, seen by the live runtime as a node:
crash = SIGKILL to its process group, restart = the same command line again (its data
directory is its own and survives), pause/resume = SIGSTOP/SIGCONT.

A restart waits for the process to be ready again (its readiness check), which can take
seconds; it runs in a thread of its own so that the runtime's loop keeps serving the other
nodes meanwhile. Every process started here is reaped by `ManagedProcess`.
"""

from __future__ import annotations

import threading

from harness.live.supervisor import ManagedProcess, SupervisorError


class ExternalNode:
    def __init__(self, process: ManagedProcess, role: str, implementation: str = "external") -> None:
        self.process = process
        self.role = role
        self.implementation = implementation
        self.restart_errors: list[str] = []
        self._restarting: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.process.running

    def kill(self) -> str:
        """SIGKILL and reap; says how it ended."""
        code = self.process.kill()
        return f"exit status {code}"

    def restart_in_background(self) -> None:
        def restart() -> None:
            try:
                self.process.restart(grace=0.5)
            except SupervisorError as exc:  # it did not come back: its peers will notice
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
