"""The ``zmq-harness`` command."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from harness.protocols import PROTOCOLS


def _parse_frame(text: str) -> bytes:
    t = text.strip().replace(" ", "").replace(":", "")
    if t.lower().startswith("0x"):
        t = t[2:]
    try:
        return bytes.fromhex(t)
    except ValueError:
        raise SystemExit(f"zmq-harness decode: {text!r} is not hex (give each frame as hex digits; '' is an empty frame)")


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


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="zmq-harness", description=__doc__)
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

    c = sub.add_parser("clauses", help="print or regenerate the clause catalogues (docs/clauses/*.md)")
    c.add_argument("protocols", nargs="*", metavar="PROTOCOL", help=f"any of {', '.join(PROTOCOLS)} (default: all)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    c.add_argument("--dir", default="docs/clauses")
    c.set_defaults(func=cmd_clauses)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
