"""Random histories of a correct (atomic) key-value store, for tests and benchmarks.

Each client runs one operation at a time: it waits a think time, invokes, and the operation
returns after a random latency. Every operation that takes effect does so at one instant
inside its interval, and the store applies them in the order of those instants, so the
history is linearizable by construction. Some operations may time out (status info: they took
effect or not, the client never learns which) or fail (they did not take effect).
"""

from __future__ import annotations

import random
from typing import Any

from harness.checkers.history import FAIL, INFO, OK

MIX = (("get", 0.45), ("put", 0.30), ("cas", 0.20), ("delete", 0.05))


def atomic_kv_history(rng: random.Random, ops: int, clients: int = 8, keys: int = 4, values: int = 5,
                      info_rate: float = 0.0, fail_rate: float = 0.0, latency_ns: int = 2_000_000,
                      think_ns: int = 500_000, mix: tuple[tuple[str, float], ...] = MIX) -> list[dict[str, Any]]:
    """``ops`` operations of ``clients`` clients on ``keys`` keys with values drawn from
    ``range(values)`` (few values: many writes of the same value, as Jepsen's cas-register
    test). Latencies are exponential around ``latency_ns`` with a few slow ones (x10)."""
    names = [m for m, _ in mix]
    weights = [w for _, w in mix]
    planned: list[dict[str, Any]] = []
    clock = [rng.randrange(think_ns + 1) for _ in range(clients)]
    for i in range(ops):
        c = min(range(clients), key=lambda k: (clock[k], k))  # the next client to invoke
        invoke = clock[c]
        slow = 10 if rng.random() < 0.02 else 1
        latency = 1 + int(rng.expovariate(1 / latency_ns) * slow)
        ret = invoke + latency
        f = rng.choices(names, weights)[0]
        key = f"k{rng.randrange(keys)}"
        inp: dict[str, Any] = {"key": key}
        if f == "put":
            inp["value"] = rng.randrange(values)
        elif f == "cas":
            inp["expected"] = rng.randrange(values)
            inp["new"] = rng.randrange(values)
        roll = rng.random()
        status = INFO if roll < info_rate else FAIL if roll < info_rate + fail_rate else OK
        takes_effect = status == OK or (status == INFO and rng.random() < 0.5)
        planned.append({"process": f"c{c}", "f": f, "input": inp, "invoke": invoke, "return": ret,
                        "status": status, "at": invoke + rng.randrange(latency + 1) if takes_effect else None})
        clock[c] = ret + 1 + int(rng.expovariate(1 / think_ns)) if think_ns else ret + 1
    store: dict[str, Any] = {}
    for op in sorted((p for p in planned if p["at"] is not None), key=lambda p: p["at"]):
        inp = op["input"]
        key = inp["key"]
        if op["f"] == "get":
            op["output"] = store.get(key)
        elif op["f"] == "put":
            store[key] = inp["value"]
        elif op["f"] == "delete":
            store.pop(key, None)
        else:
            hit = store.get(key) == inp["expected"]
            if hit:
                store[key] = inp["new"]
            op["output"] = hit
    out = []
    for op in planned:
        del op["at"]
        if op["status"] != OK:
            op.pop("output", None)
        else:
            op.setdefault("output", None)
        out.append(op)
    return out
