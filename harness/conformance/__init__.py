"""Conformance suites: case files, the conductor that plays the other roles, the runner."""

# How long an implementation under test may take to start, per case, by default: to accept
# connections on the ports it binds, or to connect to the harness's (`--start-timeout`). Here,
# not in the runner, so the command line and the pytest plugin read it without importing it.
START_TIMEOUT_S = 15.0
