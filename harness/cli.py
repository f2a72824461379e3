"""The ``zmq-harness`` command: a conformance and chaos-testing harness for five ZeroMQ
protocols (Dafka, DCP, Event BUS, PPPP, Raft over ZeroMQ). It runs conformance suites against
an implementation (conform), chaos scenarios in a deterministic simulator or over real sockets
(run), reference nodes on their own (node), and turns traces into reports with Spark (report)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from typing import Any, Sequence

from harness.conformance import START_TIMEOUT_S
from harness.protocols import PROTOCOLS
from harness.registry import package, protocols


def _parse_frame(text: str) -> bytes:
    t = text.strip().replace(" ", "").replace(":", "")
    if t.lower().startswith("0x"):
        t = t[2:]
    try:
        return bytes.fromhex(t)
    except ValueError:
        raise UsageError(f"zmq-harness decode: {text!r} is not hex (give each frame as hex digits; '' is an empty frame)")


class UsageError(Exception):
    """Bad command-line input: message to stderr, exit status 2."""


def cmd_decode(args: argparse.Namespace) -> int:
    from harness.protocols import DecodeError, codec

    try:
        c = codec(args.protocol, args.dialect)
    except KeyError as e:
        print(f"zmq-harness decode: {e.args[0]}", file=sys.stderr)
        return 2
    frames = [_parse_frame(f) for f in args.frames]
    try:
        msg = c.decode(frames, as_=args.as_, channel=args.channel)
    except DecodeError as e:
        if args.json:
            print(json.dumps({"error": e.to_dict()}, indent=2))
        else:
            print(f"error: {e}")
        return 1
    shown = c.show(msg)
    if args.json:
        print(json.dumps({"protocol": args.protocol, "dialect": args.dialect, "message": msg.name, "fields": shown},
                         indent=2, default=str))
    else:
        print(f"{args.protocol} {msg.name} ({args.dialect}, {len(frames)} frame(s))")
        for k, v in shown.items():
            print(f"  {k}: {json.dumps(v, default=str, ensure_ascii=False)}")
    return 0


def cmd_clauses(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.protocols import catalogue

    root = Path(args.dir)
    stale = []
    unknown = [p for p in args.protocols if p not in PROTOCOLS]
    if unknown:
        print(f"zmq-harness clauses: unknown protocol(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    for p in args.protocols or PROTOCOLS:
        text = catalogue(p).render_markdown()
        path = root / f"{p}.md"
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path} ({len(catalogue(p))} clauses)")
        elif args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            print(text)
    if stale:
        print("out of date (run `zmq-harness clauses --write`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from harness.scenario import ScenarioError, load_scenario, parse_mutant_options, parse_seeds, with_mutants

    try:
        scenario = load_scenario(args.file)
        chosen = args.seed if args.seed is not None else args.seeds
        seeds = parse_seeds(chosen) if chosen is not None else scenario.seeds
        if args.mutant:
            scenario = with_mutants(scenario, parse_mutant_options(args.mutant))
    except (ScenarioError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.live and args.seeds is not None and len(seeds) > 1:
        raise UsageError(f"zmq-harness run: --live runs a scenario once, over real sockets; --seeds {args.seeds} "
                         f"names {len(seeds)} seeds (give --seed N, or run the seeds in simulation)")
    from harness.interrupts import Interrupted, interruptible

    if args.capture is not None and not args.live:
        raise UsageError("zmq-harness run: --capture records real traffic; it needs --live")
    done: list[Any] = []
    try:
        with interruptible():
            return _run_live(args, scenario, seeds[0]) if args.live else _run_sim(args, scenario, seeds, done)
    except Interrupted as e:
        what = "the live run" if args.live else f"after {len(done)} of {len(seeds)} seed(s)"
        print(f"\nzmq-harness run: stopped by {e.name} ({what}); processes reaped, traces written to {args.out}",
              file=sys.stderr)
        return e.exit_status


def _run_live(args: argparse.Namespace, scenario: Any, seed: int) -> int:
    from harness.capture.sniff import CaptureError
    from harness.composition import RunError, capture_path, run_live

    capture = (args.capture or capture_path(args.out, scenario, seed)) if args.capture is not None else None
    try:
        result = run_live(scenario, seed, args.out, capture=capture)
    except CaptureError as e:
        raise UsageError(f"zmq-harness run --capture: {e}")
    except RunError as e:
        print(f"error: {args.file}: {e}", file=sys.stderr)
        return 2
    _print_result(result, args.file, _mutant_flags(args))
    if "capture" in result.stats:
        c = result.stats["capture"]
        dropped = f", {c['dropped']} DROPPED by the kernel" if c["dropped"] else ""
        print(f"  capture: {c['path']} ({c['tool']}, {c['packets']} packet(s){dropped}); check it with: "
              f"zmq-harness pcap {c['path']} --protocol {scenario.protocol}")
    return 0 if result.ok else 1


def _run_sim(args: argparse.Namespace, scenario: Any, seeds: list[int], done: list[Any]) -> int:
    import time

    from harness.composition import RunError, run_sim

    mutants = _mutant_flags(args)
    failed = []
    t0 = time.monotonic()
    show_progress = len(seeds) > 1 and not args.quiet
    for i, seed in enumerate(seeds, 1):
        try:
            result = run_sim(scenario, seed, args.out)
        except RunError as e:
            print(f"error: {args.file}: {e}", file=sys.stderr)
            return 2
        done.append(result)
        if not result.ok:
            failed.append(result)
            _print_result(result, args.file, mutants)
        elif len(seeds) == 1:
            _print_result(result, args.file, mutants)
        if show_progress:
            elapsed = time.monotonic() - t0
            eta = elapsed / i * (len(seeds) - i)
            print(f"\r[{i}/{len(seeds)}] seed {seed}: {'ok' if result.ok else 'FAIL'}"
                  f"  {len(failed)} failed  {elapsed:.1f}s elapsed, ~{eta:.0f}s left   ",
                  end="", file=sys.stderr, flush=True)
    if show_progress:
        print(file=sys.stderr)
    print(f"{scenario.name}: {len(seeds) - len(failed)}/{len(seeds)} seed(s) passed; traces and verdicts in {args.out}")
    if failed:
        print("replay a failure with: " + _replay(args.file, failed[0].seed, mutants))
        print("shrink it with: " + _replay(args.file, failed[0].seed, mutants).replace(" run ", " explore ", 1))
    return 0 if not failed else 1


def _mutant_flags(args: argparse.Namespace) -> str:
    """The --mutant options of a run, as they go into its replay command."""
    return "".join(f" --mutant {m}" for m in args.mutant or [])


def _replay(path: str, seed: int, mutants: str = "") -> str:
    return f"zmq-harness run {path} --seed {seed}{mutants}"


def _print_result(result, path: str, mutants: str = "") -> None:
    status = "PASS" if result.ok else "FAIL"
    print(f"{status} {result.scenario}" + (f" seed {result.seed}" if result.mode != "pcap" else "") + f" ({result.mode})")
    for v in result.verdicts:
        mark = "ok  " if v.ok else "FAIL"
        level = f" ({v.level})" if v.level != "MUST" else ""  # an opt-in check of a SHOULD or MAY
        print(f"  {mark} {v.check}" + (f" [{v.clause}]" if v.clause else "") + f"{level}: {v.detail}")
        if not v.ok:
            for ev in v.evidence[:6]:
                print(f"         {json.dumps(ev, default=str)[:300]}")
    seen = result.stats.get("observed_traffic") if isinstance(result.stats, dict) else None
    if seen:
        print(f"  seen by the proxy: {seen['sends']} message(s) sent, {seen['receives']} received by "
              f"external nodes")
    if not result.ok:
        print(f"  trace: {result.trace_path}")
        if result.mode == "sim":
            print(f"  replay: {_replay(path, result.seed, mutants)}")


def cmd_explore(args: argparse.Namespace) -> int:
    from harness.explore.cli import run_explore

    return run_explore(args)


def cmd_pcap(args: argparse.Namespace) -> int:
    from harness.capture.convert import PcapInputError, PcapOptions, check_pcap
    from harness.capture.nodes import parse_ports

    try:
        options = PcapOptions(args.protocol, args.dialect, parse_ports(args.ports), args.out, args.name,
                              args.implementation or "captured", not args.no_frames)
        result = check_pcap(args.file, options)
    except (PcapInputError, ValueError) as e:
        raise UsageError(f"zmq-harness pcap: {e}")
    stats = result.stats
    print(f"{args.file}: {stats['messages']} {args.protocol} message(s) on {stats['links']} ZMTP connection(s) "
          f"between {len(result.nodes)} node(s), {stats['duration_s']:.2f} s of traffic")
    _print_result(result, args.file)
    for check, why in result.not_applicable:
        print(f"  n/a  {check}: {why}")
    for note in result.notes:
        print(f"  note: {note}")
    roles = ", ".join(f"{n} ({r or 'role unknown'})" for n, r in result.nodes.items())
    print(f"  nodes: {roles}")
    if result.ok:
        print(f"  trace: {result.trace_path}")
    print(f"  verdicts: {result.result_path}")
    return 0 if result.ok else 1


def cmd_node(args: argparse.Namespace) -> int:
    import yaml

    from harness.live.standalone import EXIT_NODE_FAILED, run_standalone
    from harness.registry import package

    try:
        pkg = package(args.protocol)
    except KeyError as e:
        raise UsageError(f"zmq-harness node: {e.args[0]}")
    if not pkg.roles:
        raise UsageError(f"zmq-harness node: no reference nodes for {args.protocol!r} yet (see zmq-harness protocols)")
    role = pkg.roles.get(args.role)
    if role is None:
        raise UsageError(f"zmq-harness node: {args.protocol} has no role {args.role!r} (roles: {', '.join(pkg.roles)})")
    config: dict = {"dialect": args.dialect}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep or key not in role.settings:
            raise UsageError(f"zmq-harness node: --set takes KEY=VALUE with KEY one of {', '.join(role.settings)}")
        try:
            config[role.settings[key].key] = role.settings[key].parse(yaml.safe_load(value))
        except (ValueError, TypeError) as e:
            raise UsageError(f"zmq-harness node: --set {key}: {e}")
    if args.bind:
        config["bind"] = list(args.bind)
    if args.connect:
        config["connect"] = args.connect[0] if len(args.connect) == 1 else list(args.connect)
    if args.identity:
        config["identity"] = args.identity.encode()
    # Its clock starts at 0 now: wall-clock stamps (Raft reqids) are taken from here, so that a
    # real peer does not refuse them as older than REQUEST_UPDATE_TTL (Scenario.epoch_s).
    config.setdefault("epoch_s", int(time.time()))

    factory = _factory(args.protocol, args.role, args.mutant) if args.mutant else role.factory
    if args.store and args.data_dir:
        raise UsageError("zmq-harness node: give --store or --data-dir, not both")
    store_path = args.store
    if args.data_dir:
        os.makedirs(args.data_dir, exist_ok=True)
        store_path = os.path.join(args.data_dir, f"{args.protocol}-{args.role}.store")
    if store_path:
        from harness.live.filestore import FileStore, with_store

        factory = with_store(factory, FileStore(store_path))
    from harness.live.sockets import SocketSetupError

    try:
        code = run_standalone(factory, name=args.name or f"{args.protocol}-{args.role}", role=args.role,
                              config=config, trace_path=args.trace, seed=args.seed, output=pkg.output)
    except SocketSetupError as e:  # a port in use, an endpoint that does not parse
        raise UsageError(f"zmq-harness node: {e}")
    except ValueError as e:  # a setting the node refuses when it is built
        raise UsageError(f"zmq-harness node: {args.protocol} {args.role}: {e}")
    if code == EXIT_NODE_FAILED:
        # The node crashed; its trace is closed and its store flushes every write. Leave without
        # the interpreter's teardown (0.5-0.7 s on a loaded machine, with pyarrow and the codecs
        # loaded): whoever supervises the process sees the crash that much sooner.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def cmd_conform(args: argparse.Namespace) -> int:
    import os
    import shlex

    from harness.conformance.case import CaseError
    from harness.conformance.runner import load_suite
    from harness.registry import suite

    try:
        rs = suite(args.protocol, args.role)
        cases = load_suite(args.protocol, args.role, args.suite_dir, args.case)
    except (KeyError, CaseError) as e:
        raise UsageError(f"zmq-harness conform: {e.args[0] if isinstance(e, KeyError) else e}")
    if not cases:
        raise UsageError(f"zmq-harness conform: no cases selected in {rs.cases_dir(args.suite_dir)}")
    modes = [bool(args.cmd), bool(args.endpoint), args.reference, args.sim]
    if sum(modes) != 1:
        raise UsageError("zmq-harness conform: give exactly one of --cmd, --endpoint, --reference, --sim")
    if args.endpoint and (not rs.iut_binds or rs.harness_endpoints):
        why = (f"connects to endpoints the harness binds afresh for every case "
               f"({', '.join('{' + n + '}' for n in rs.harness_endpoints)})" if rs.harness_endpoints
               else "connects to the harness, which plays its peers afresh for every case")
        raise UsageError(f"zmq-harness conform: --endpoint is for an implementation that is already up and listening; "
                         f"a {args.protocol} {args.role} {why}: start it with --cmd")
    if args.cmd:
        from harness.conformance.runner import check_command

        try:
            check_command(rs, args.cmd)
        except ValueError as e:
            raise UsageError(f"zmq-harness conform: --cmd: {e}")
    if args.mutant and not (args.reference or args.sim):
        raise UsageError("zmq-harness conform: --mutant goes with --reference or --sim")
    label = args.implementation or ("reference" if args.reference or args.sim else "external")
    if args.mutant:
        label = f"mutant:{args.mutant}"
    factory = _factory(args.protocol, args.role, args.mutant) if args.sim else None
    out_dir = os.path.join(args.out, f"{args.protocol}-{args.role}")
    base = f"zmq-harness conform {args.protocol} {args.role} --dialect {args.dialect}"
    if args.suite_dir:
        base += f" --suite-dir {shlex.quote(args.suite_dir)}"
    if args.start_timeout != START_TIMEOUT_S:
        base += f" --start-timeout {args.start_timeout:g}"
    cmd = args.cmd
    if args.reference:
        cmd = rs.reference_cmd + (f" --mutant {args.mutant}" if args.mutant else "")
    rerun = base + (" --sim" + (f" --mutant {args.mutant}" if args.mutant else "") if args.sim
                    else f" --cmd {shlex.quote(args.cmd)}" if args.cmd else f" --endpoint {args.endpoint}"
                    if args.endpoint else " --reference" + (f" --mutant {args.mutant}" if args.mutant else ""))
    return _conform(args, rs, cases, factory, cmd, label, out_dir, rerun)


def _conform(args: argparse.Namespace, rs: Any, cases: list[Any], factory: Any, cmd: str | None, label: str,
             out_dir: str, rerun: str) -> int:
    """Run the cases, printing each verdict as it comes; on SIGTERM/SIGINT (or when the
    implementation keeps failing to start) stop, and still write JUnit, results.json and the
    verdicts of the cases that finished, and print the summary."""
    import os

    from harness.conformance.report import (
        case_width, exit_status, print_case, print_header, print_summary, results_json, write_junit,
    )
    from harness.conformance.runner import SuiteAborted, run_case_sim, run_suite, write_trace_verdicts
    from harness.interrupts import Interrupted, interruptible
    from harness.live.supervisor import reap_all

    results: list[Any] = []
    width = case_width(cases)

    def finished(r: Any) -> None:
        results.append(r)
        print_case(r, sys.stdout, width)

    print_header(args.protocol, args.role, len(cases), sys.stdout)
    stopped: Interrupted | None = None
    aborted: SuiteAborted | None = None
    with interruptible():
        try:
            if args.sim:
                for c in cases:
                    r = run_case_sim(c, factory, dialect=args.dialect)
                    r.rerun = f"{rerun} --case {c.id}"
                    finished(r)
            else:
                run_suite(cases, cmd=cmd, endpoint=args.endpoint, dialect=args.dialect,
                          trace_dir=os.path.join(out_dir, "traces"), rerun_base=rerun, on_result=finished,
                          start_timeout=args.start_timeout)
        except Interrupted as e:
            stopped = e
            reap_all()  # whatever a case had started is gone before we write anything
        except SuiteAborted as e:
            aborted = e
        print_summary(results, args.protocol, args.role, sys.stdout, verbose=args.verbose)
        junit = args.junit or os.path.join(out_dir, "junit.xml")
        write_junit(junit, results, args.protocol, args.role, label)
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(results_json(results, args.protocol, args.role, label), f, indent=1, default=str)
        write_trace_verdicts(os.path.join(out_dir, "verdicts.parquet"), results, label)
        print(f"JUnit: {junit}; results and traces in {out_dir}")
    if stopped is not None:
        print(f"zmq-harness conform: stopped by {stopped.name} after {len(results)} of {len(cases)} case(s); "
              "the implementation was stopped and reaped", file=sys.stderr)
        return stopped.exit_status
    if aborted is not None:
        print(f"zmq-harness conform: {aborted}", file=sys.stderr)
        return 2
    return exit_status(results, args.fail_on)


def _factory(protocol: str, role: str, mutant: str | None):
    from harness.registry import package

    pkg = package(protocol)
    if mutant:
        if mutant not in pkg.mutants:
            raise UsageError(f"no {protocol} mutant {mutant!r} (mutants: {', '.join(pkg.mutants) or 'none yet'})")
        mrole, factory, _ = pkg.mutants[mutant]
        if mrole != role:
            raise UsageError(f"mutant {mutant!r} is a {mrole}, not a {role}")
        return factory
    return pkg.roles[role].factory


def cmd_protocols(args: argparse.Namespace) -> int:
    from harness.registry import parts_table

    unknown = [p for p in args.protocols if p not in protocols()]
    if unknown:
        raise UsageError(f"zmq-harness protocols: unknown protocol(s) {', '.join(unknown)} "
                         f"(known: {', '.join(protocols())})")
    print(parts_table(args.protocols or None), end="")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from reports.cli import run

    return run(args)


def _roles_text() -> str:
    """Per protocol: the roles it has reference nodes for and the roles it has suites for."""
    from harness.registry import package

    lines = ["protocols, their roles (reference nodes) and conformance suites:"]
    for name in protocols():
        pkg = package(name)
        roles = ", ".join(pkg.roles) or "none yet"
        suites = ", ".join(pkg.suites) or "none yet"
        lines.append(f"  {name:<9} roles: {roles}; suites: {suites}")
    return "\n".join(lines)


def build_parser(help_texts: bool = True) -> argparse.ArgumentParser:
    """The command line. ``help_texts=False`` leaves out the help that lists every protocol's roles
    and suites: it imports every package (checkers, mutants, suites), which a command that prints no
    help — a `node` started for each conformance case above all — should not wait for."""

    def roles_of(part: str) -> str:
        if not help_texts:
            return ""
        return "; ".join(f"{p}: {', '.join(getattr(package(p), part))}" for p in protocols()
                         if getattr(package(p), part))

    about = (__doc__ or "").replace("``", "")  # plain text in a terminal
    ap = argparse.ArgumentParser(prog="zmq-harness", description=about, epilog=(_roles_text() if help_texts else "")
                                 + "\n\n"
                                 "zmq-harness COMMAND --help says more; the guide is in docs/.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    d = sub.add_parser("decode", help="decode one message given as hex frames",
                       description="Decode one multipart message. Each FRAME is hex; '' is an empty frame. Give the "
                       "frames as the sending application hands them to its socket (with the empty delimiter where "
                       "the protocol has one). Exit 0 and print the message, or exit 1 and print the error.")
    d.add_argument("protocol", choices=PROTOCOLS)
    d.add_argument("frames", nargs="*", metavar="FRAME")
    d.add_argument("--dialect", default="strict", help="strict (default) or a deployed dialect, e.g. dcp:dagbox")
    d.add_argument("--as", dest="as_", metavar="MESSAGE", help="decode as this message (responses, ambiguous layouts)")
    d.add_argument("--channel", help="the socket/direction the frames travelled on, when the layout alone is ambiguous")
    d.add_argument("--json", action="store_true", help="print JSON")
    d.set_defaults(func=cmd_decode)

    r = sub.add_parser("run", help="run a scenario in simulation (seeds) or over real sockets (--live)",
                       description="Run a scenario file. In simulation every seed is one reproducible run; "
                       "exit 0 only when every check held for every seed.")
    r.add_argument("file")
    r.add_argument("--seed", type=int, help="run this one seed")
    r.add_argument("--seeds", help="seeds to run, e.g. 1-500 or 1,5,9 (default: the file's 'seeds')")
    r.add_argument("--live", action="store_true", help="run once over real sockets on loopback")
    r.add_argument("--capture", nargs="?", const="", metavar="OUT.pcap",
                   help="with --live: record the run's loopback traffic (tcpdump when installed, else scapy's sniffer; "
                   "needs root or CAP_NET_RAW) into OUT.pcap, or beside the trace when no path is given")
    r.add_argument("--out", default="runs", help="directory for traces and verdicts (default: runs/)")
    r.add_argument("--quiet", action="store_true", help="no progress line")
    r.add_argument("--mutant", action="append", metavar="ROLE=NAME",
                   help="run a shipped mutant instead of the reference node of a role (or group); repeatable")
    r.set_defaults(func=cmd_run)

    from harness.explore.cli import add_arguments as _explore_arguments

    e = sub.add_parser("explore", help="search a scenario's faults for a failure and shrink it to a minimal file",
                       description="Draw fault schedules and workload variations from the scenario's 'explore:' "
                       "section (or its defaults) with hypothesis and run each in simulation (--live: over real "
                       "sockets); on the first failure, shrink it while it fails the same property and write the "
                       "smallest schedule as a scenario file, with an explanation and a space-time diagram, to --out. "
                       "Exit 0 when nothing fails within the budget, 1 with a shrunk failure, 2 on bad input.")
    _explore_arguments(e)
    e.set_defaults(func=cmd_explore)

    pc = sub.add_parser("pcap", help="check a deployment from a packet capture (pcap or pcapng)",
                        description="Read a capture, reassemble its TCP streams, parse ZMTP, decode every message "
                        "with the protocol's codec, write a trace (OUT/<name>/pcap.parquet) and run the checks a "
                        "capture can support: the protocol's wire-observable checkers and a strict decode of every "
                        "message against the document's clauses. Exit 0 when every check holds, 1 on a failure, 2 on "
                        "bad input.")
    pc.add_argument("file", help="a pcap or pcapng file")
    pc.add_argument("--protocol", required=True, choices=protocols())
    pc.add_argument("--dialect", default="strict", help="decode in this dialect (strict conformance is reported too)")
    pc.add_argument("--ports", action="append", metavar="PORT[=ROLE[/NAME]]",
                    help="read only connections to or from these TCP ports (comma-separated, repeatable; default: "
                    "every connection that starts with a ZMTP greeting); =ROLE gives the role of the node listening "
                    "there, /NAME its name")
    pc.add_argument("--out", default="runs", help="directory for the trace and verdicts (default: runs/)")
    pc.add_argument("--name", help="name of the run in the trace and report (default: pcap-<file name>)")
    pc.add_argument("--implementation", help="label of the implementation for reports (default: captured)")
    pc.add_argument("--no-frames", action="store_true", help="leave the raw frames out of the trace")
    pc.set_defaults(func=cmd_pcap)

    n = sub.add_parser("node", help="run one reference node standalone over real sockets",
                       description="Run one reference node until SIGTERM/SIGINT. It prints 'READY <name> <endpoints>' "
                       "once its sockets are bound. Example: zmq-harness node dcp broker --bind tcp://127.0.0.1:5555")
    n.add_argument("protocol", choices=protocols())
    n.add_argument("role", help=roles_of("roles"))
    n.add_argument("--bind", action="append", metavar="ENDPOINT", help="endpoint to bind (repeatable)")
    n.add_argument("--connect", action="append", metavar="ENDPOINT", help="endpoint to connect to (repeatable)")
    n.add_argument("--set", action="append", metavar="KEY=VALUE", help="a role setting, as in scenario files")
    n.add_argument("--identity", help="routing identity of the node's DEALER socket")
    n.add_argument("--dialect", default="strict")
    n.add_argument("--name")
    n.add_argument("--seed", type=int, default=0)
    n.add_argument("--trace", help="write a Parquet trace here")
    n.add_argument("--store", metavar="PATH", help="keep the node's durable store in this file, so that it survives "
                   "the process being killed and started again (default: in memory)")
    n.add_argument("--data-dir", metavar="DIR", help="keep the node's durable store in DIR (created if missing; the "
                   "file DIR/<protocol>-<role>.store): what an external node's {data_dir} is for")
    n.add_argument("--mutant", help="run a deliberately broken variant (see reference_nodes/<protocol>/mutants.py)")
    n.set_defaults(func=cmd_node)

    k = sub.add_parser("conform", help="run a conformance suite against an implementation",
                       description="Run the conformance suite of one role against an implementation: started "
                       "fresh for every case from --cmd (placeholders such as {endpoint} are filled), reached at "
                       "--endpoint, the reference node (--reference), or in the simulator (--sim). Exit status "
                       "is non-zero on any MUST failure (and SHOULD with --fail-on should).")
    k.add_argument("protocol", choices=protocols())
    k.add_argument("role", help="the role under test: " + roles_of("suites"))
    k.add_argument("--cmd", help="command line of the implementation, e.g. \"mybroker --bind {endpoint}\"")
    k.add_argument("--endpoint", help="endpoint of an implementation that is already running")
    k.add_argument("--reference", action="store_true", help="test the reference node, run as a subprocess")
    k.add_argument("--sim", action="store_true", help="run the cases in the simulator against the reference node")
    k.add_argument("--mutant", help="with --reference or --sim: a deliberately broken variant instead")
    k.add_argument("--dialect", default="strict")
    k.add_argument("--case", action="append", help="run only this case (id or name; repeatable)")
    k.add_argument("--fail-on", choices=("must", "should"), default="must")
    k.add_argument("--start-timeout", type=_seconds, default=START_TIMEOUT_S, metavar="SECONDS",
                   help="how long the implementation may take to start, per case: to accept connections on the "
                        "ports it binds, or to connect to the harness's (no step's wait counts from before); "
                        "default 15")
    k.add_argument("--junit", help="JUnit XML path (default OUT/<protocol>-<role>/junit.xml)")
    k.add_argument("--out", default="runs/conformance")
    k.add_argument("--implementation", help="label for reports")
    k.add_argument("--suite-dir", "--suites", dest="suite_dir", metavar="DIR",
                   help="a tree of your own cases, DIR/<protocol>/conformance/<role>/*.yaml (default: the suites "
                        "that ship with zmq-harness)")
    k.add_argument("-v", "--verbose", action="store_true")
    k.set_defaults(func=cmd_conform)

    rp = sub.add_parser("report", help="aggregate traces with Spark into report.json and report.html",
                        description="Run the PySpark report job over a directory (or any Spark-readable path) of "
                        "trace Parquet files: pass/fail per implementation x protocol x role x clause and per "
                        "scenario x seed, latency percentiles per message type and fault window, plots.")
    from reports.cli import add_arguments as _report_arguments

    _report_arguments(rp)
    rp.set_defaults(func=cmd_report)

    c = sub.add_parser("clauses", help="print or regenerate the clause catalogues (docs/clauses/*.md)",
                       description=textwrap.fill(
                           "Every MUST / SHOULD / MAY statement of a protocol's document has a stable clause id "
                           "(e.g. dcp.heartbeat.pong), a level, the section it is in, the roles it binds and "
                           "whether it shows on the wire; conformance verdicts and checkers name clauses by id. "
                           "Without options: print the catalogue of each PROTOCOL as Markdown.", 79),
                       epilog=_roles_text() if help_texts else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("protocols", nargs="*", metavar="PROTOCOL", help=f"any of {', '.join(PROTOCOLS)} (default: all)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="write DIR/<protocol>.md for each protocol")
    g.add_argument("--check", action="store_true", help="exit 1 if a file in DIR is not the catalogue as it is now")
    c.add_argument("--dir", default="docs/clauses", help="where --write and --check look (default: docs/clauses)")
    c.set_defaults(func=cmd_clauses)

    pr = sub.add_parser("protocols", help="list each protocol's package: what it has and what it still lacks",
                        description="Print one row per protocol registered in harness/registry.py: its wire "
                        "dialects, clauses, roles, workload operations, checks, mutants, conformance suites and "
                        "symbolic fault targets, and the parts it lacks (docs/adding-a-protocol.md).")
    pr.add_argument("protocols", nargs="*", metavar="PROTOCOL", help="any of " + ", ".join(protocols())
                    + " (default: all)")
    pr.set_defaults(func=cmd_protocols)
    return ap


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse reports the ValueError as a usage error)."""
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


class _ReaderGone:
    """stdout that survives its reader leaving (``zmq-harness ... | head``): from the first
    broken pipe on, output goes to /dev/null and the command runs to its end, so its exit
    status is the real one (a failed run stays a failure under ``set -o pipefail``)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._detach()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._detach()

    def _detach(self) -> None:
        import os

        self.gone = True
        try:  # what is still buffered, and the interpreter's last flush, go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(help_texts=not given or "-h" in given or "--help" in given)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Options may stand between the frames of `decode`: frames after an option arrive here.
        if args.command != "decode" or any(x.startswith("--") for x in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.frames = [*args.frames, *extra]
    stdout = sys.stdout
    if not isinstance(stdout, _ReaderGone):
        sys.stdout = _ReaderGone(stdout)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    finally:
        sys.stdout.flush()
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
