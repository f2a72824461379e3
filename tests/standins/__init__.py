"""Small stand-ins for real implementations the harness met (docs/real-implementations.md): each
behaves as one deployed program was seen to behave, so that the harness's verdicts against such
programs are tested without their sources (CI has no internet). Each is a program of its own,
started by the conformance runner like any implementation under test."""
