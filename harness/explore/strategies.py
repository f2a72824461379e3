"""Hypothesis strategies over a scenario's exploration space (`harness.explore.space`).

``candidates(scenario, space, base)`` draws a `Candidate`: a seed, group sizes within their
bounds, a rate factor per workload item, and up to ``max_faults`` faults from the vocabulary,
added to the file's own faults. Every drawn fault is written as a scenario file writes it
(durations with units, probabilities in percent), starts no earlier than ``from`` and ends
before the quiet end of the run; every crash restarts. Targets are drawn per fault among the
space's targets and, for a group, each of its nodes (in the drawn topology).
"""

from __future__ import annotations

import json
import random
from typing import Any, Callable

from hypothesis import strategies as st

from harness.explore.candidate import Candidate, fmt_duration, fmt_probability
from harness.explore.space import EFFECTS, MS, RULE, Space
from harness.packages.base import as_rate
from harness.scenario import Scenario
from harness.targets import Targets

SEED_MAX = 2**31 - 1
CORRUPT = "corrupt"
CORRUPT_NTH = 10  # a corrupt rule pinned to one message picks one of the first this many it matches
CORRUPT_SHARE = 1 / 2  # of the candidates that get a corrupt rule
CORRUPT_ONE = 3 / 4  # of the corrupt rules that damage one message (nth) rather than a share


def candidates(scenario: Scenario, space: Space, base: Candidate) -> st.SearchStrategy[Candidate]:
    """Candidates around ``base`` (the file as written): its faults kept, more drawn."""

    @st.composite
    def draw(draw_: Any) -> Candidate:
        seed = draw_(st.integers(1, SEED_MAX))
        counts = tuple((g, draw_(st.integers(*space.counts[g])) if g in space.counts else n) for g, n in base.counts)
        cand = base.with_(seed=seed, counts=counts)
        nodes = cand.nodes(scenario)
        workload = tuple(_scaled(item, draw_(st.sampled_from(space.rates()))) for item in base.workload)
        others = bool(set(space.kinds) - {RULE}) or _plain_rules(space)
        extra = draw_(st.lists(fault(scenario, space, nodes, base.duration_ns), min_size=min(1, space.max_faults),
                               max_size=space.max_faults)
                      if others else st.just([]))
        extra += corrupt_rules(space, f"{seed}/{json.dumps(extra, sort_keys=True)}", always=not others)
        return cand.with_(workload=workload, faults=base.faults + tuple(extra))

    return draw()


def mutations(scenario: Scenario, space: Space, base: Candidate) -> Callable[[Candidate], st.SearchStrategy[Candidate]]:
    """The children of a candidate (coverage-guided search): another seed, another workload
    rate, one drawn fault more (up to ``max_faults`` beyond the file's own), one fault fewer,
    one replaced by a drawn one, one moved to a drawn window, or (when the space allows
    corrupt) another drawn corrupt rule in place of the drawn ones it had, as `candidates` adds
    them on top of ``max_faults``."""
    last_end_ms = space.last_end_ns(base.duration_ns) // MS
    corrupts = bool(corrupt_rules(space, 0, always=True))

    def other_corrupt(parent: Candidate, key: int) -> Candidate:
        kept = tuple(f for f in parent.faults if f in base.faults or not _is_corrupt(f))
        return parent.with_(faults=kept + tuple(corrupt_rules(space, f"mutation/{key}", always=True)))

    def children(parent: Candidate) -> st.SearchStrategy[Candidate]:
        one = fault(scenario, space, parent.nodes(scenario), base.duration_ns)
        options = [st.integers(1, SEED_MAX).map(lambda seed: parent.with_(seed=seed))]
        if space.rates() != [1.0]:
            options.append(st.sampled_from(space.rates()).map(
                lambda r: parent.with_(workload=tuple(_scaled(w, r) for w in base.workload))))
        if len(parent.faults) - len(base.faults) < space.max_faults:
            options.append(one.map(lambda f: parent.with_(faults=parent.faults + (f,))))
        if parent.faults:
            index = st.integers(0, len(parent.faults) - 1)
            options.append(index.map(lambda i: parent.with_(faults=parent.faults[:i] + parent.faults[i + 1:])))
            options.append(st.tuples(index, one).map(
                lambda i_f: parent.with_(faults=parent.faults[:i_f[0]] + (i_f[1],) + parent.faults[i_f[0] + 1:])))
            options.append(st.tuples(index, _window(space, last_end_ms)).map(
                lambda i_w: parent.with_(faults=parent.faults[:i_w[0]] + (_moved(parent.faults[i_w[0]], *i_w[1]),)
                                         + parent.faults[i_w[0] + 1:])))
        if corrupts:
            options.append(st.integers(1, SEED_MAX).map(lambda key: other_corrupt(parent, key)))
        return st.one_of(options)

    return children


def _is_corrupt(item: dict[str, Any]) -> bool:
    rule = item.get("rule")
    return isinstance(rule, dict) and bool(rule.get(CORRUPT))


def _moved(item: dict[str, Any], start_ms: int, length_ms: int) -> dict[str, Any]:
    """A fault item in another window (a rule, which acts all the run, stays as it is)."""
    if "restart_after" in item:
        return {**item, "at": _ms(start_ms), "restart_after": _ms(length_ms)}
    if "until" in item:
        return {**item, "from": _ms(start_ms), "until": _ms(start_ms + length_ms)}
    if "at" in item:
        return {**item, "at": _ms(start_ms)}
    return item


def _ms(value: int) -> str:
    return fmt_duration(value * MS)


def _window(space: Space, last_end_ms: int) -> st.SearchStrategy[tuple[int, int]]:
    """(start, length) in ms: starts at or after ``from``, ends by the quiet end."""
    first_ms = space.start_ns // MS
    shortest_ms, longest_ms = space.shortest_ns // MS, space.longest_ns // MS

    @st.composite
    def window(draw_: Any) -> tuple[int, int]:
        length = draw_(spread(max(1, shortest_ms), max(1, min(longest_ms, last_end_ms - first_ms))))
        start = draw_(spread(first_ms, max(first_ms, last_end_ms - length)))
        return start, length

    return window()


def _scaled(item: dict[str, Any], factor: float) -> dict[str, Any]:
    if factor == 1.0 or "rate" not in item:
        return item
    return {**item, "rate": f"{round(as_rate(item['rate']) * factor, 6):g}/s"}


def node_targets(scenario: Scenario, space: Space, nodes: list[str]) -> list[str]:
    """What a node fault may name: each target of the space, and each node of a group there."""
    out: list[str] = []
    for t in space.targets:
        out.append(t)
        group = scenario.groups.get(t)
        if group is not None and group.count is not None:
            out.extend(n for n in nodes if n.startswith(f"{t}."))
    return list(dict.fromkeys(out))


def drawn_targets(scenario: Scenario, nodes: list[str]) -> Targets:
    """The targets of the drawn topology: a group drawn larger than the file's has nodes (such as
    ``workers.2``) the file's own targets do not know, and a partition must not name one of them
    on one side and its group on the other."""
    groups: dict[str, list[str]] = {}
    roles: dict[str, str] = {}
    for g in scenario.groups.values():
        members = [g.name] if g.count is None else [n for n in nodes if n.startswith(f"{g.name}.")]
        groups[g.name] = members
        roles.update((n, g.role) for n in members)
    return Targets(groups, roles, scenario.targets.package)


def rule_ends(scenario: Scenario, nodes: list[str]) -> list[str]:
    """What a rule's ``from``/``to`` may name: a node, or every node of a group (a glob)."""
    out: list[str] = []
    for g in scenario.groups.values():
        if g.count is None:
            out.append(g.name)
        else:
            out.append(f"{g.name}.*")
            out.extend(n for n in nodes if n.startswith(f"{g.name}."))
    return out


def fault(scenario: Scenario, space: Space, nodes: list[str], duration_ns: int) -> st.SearchStrategy[dict[str, Any]]:
    """One fault item of the vocabulary."""
    targets = node_targets(scenario, space, nodes)
    kinds = [k for k in space.kinds if (k == RULE and _plain_rules(space)) or (k != RULE and targets)]
    if not kinds:
        return st.nothing()
    last_end_ms = space.last_end_ns(duration_ns) // MS
    first_ms = space.start_ns // MS

    def window() -> st.SearchStrategy[tuple[int, int]]:
        return _window(space, last_end_ms)

    ms = _ms

    target = st.sampled_from(targets) if targets else st.nothing()
    drawn = drawn_targets(scenario, nodes)

    def apart(other: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
        """Two targets that name no node in common (by name, group, role or glob; a dynamic
        target such as ``leader`` is settled when the fault fires)."""
        return st.tuples(target, other).filter(
            lambda ab: ab[0] != ab[1] and not drawn.overlap(((ab[0],), (ab[1],))))
    by_kind: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "crash": st.builds(lambda t, w: {"at": ms(w[0]), "crash": t, "restart_after": ms(w[1])}, target, window()),
        "pause": st.builds(lambda t, w: {"from": ms(w[0]), "until": ms(w[0] + w[1]), "pause": t}, target, window()),
        "partition": st.builds(_partition, apart(st.one_of(st.just("rest"), target)), st.booleans(), window(),
                               st.just(ms)),
        "slow_link": st.builds(
            lambda ab, lat, w: {"from": ms(w[0]), "until": ms(w[0] + w[1]), "slow_link": list(ab),
                                "latency": f"fixed({ms(lat)})"},
            apart(target), spread(1, max(1, space.latency_ns // MS)), window()),
        "clock_skew": st.builds(
            lambda t, at, off: {"at": ms(at), "clock_skew": t, "offset": ms(off)},
            target, spread(first_ms, max(first_ms, last_end_ms)),
            spread(-(space.skew_ns // MS), space.skew_ns // MS)),
        RULE: rule(space, rule_ends(scenario, nodes)),
    }
    return st.sampled_from(kinds).flatmap(lambda k: by_kind[k])


def spread(lo: int, hi: int, buckets: int = 8) -> st.SearchStrategy[int]:
    """An integer in ``lo..hi`` drawn from one of ``buckets`` equal slices first: hypothesis
    favours small and boundary values, which would keep most faults short and early; picking
    the slice first spreads them over the range (and still shrinks towards ``lo``)."""
    if hi - lo < buckets:
        return st.integers(lo, hi)
    width = (hi - lo + 1) / buckets
    slices = [(lo + int(i * width), lo + int((i + 1) * width) - 1) for i in range(buckets)]
    slices[-1] = (slices[-1][0], hi)
    return st.sampled_from(slices).flatmap(lambda s: st.integers(*s))


def _partition(ab: tuple[str, str], one_way: bool, w: tuple[int, int], ms: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"from": ms(w[0]), "until": ms(w[0] + w[1]), "partition": [[ab[0]], [ab[1]]]}
    if one_way:
        item["one_way"] = True
    return item


def _plain_rules(space: Space) -> bool:
    """Whether hypothesis draws rules: an effect other than corrupt is allowed."""
    return RULE in space.kinds and any(e != CORRUPT for e in space.effects)


def rule(space: Space, ends: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A message rule: one message type, one effect with a probability up to its bound,
    optionally only from or to some nodes (corrupt: see `corrupt_rules`)."""
    effects = [e for e in EFFECTS if e in space.effects and e != CORRUPT]
    if not effects or not space.messages:
        return st.nothing()

    @st.composite
    def draw(draw_: Any) -> dict[str, Any]:
        effect = draw_(st.sampled_from(effects))
        body: dict[str, Any] = {"message": draw_(st.sampled_from(space.messages))}
        for key in ("from", "to"):
            end = draw_(st.one_of(st.none(), st.sampled_from(ends)))
            if end is not None:
                body[key] = end
        body[effect] = True
        if effect == "delay":
            body[effect] = f"fixed({fmt_duration(draw_(spread(1, max(1, space.latency_ns // MS))) * MS)})"
        p = draw_(st.sampled_from(space.probabilities(effect)))
        if p < 1.0:
            body["probability"] = fmt_probability(p)
        return {"rule": body}

    return draw()


def corrupt_rules(space: Space, seed: int | str, always: bool = False) -> list[dict[str, Any]]:
    """A corrupt rule for half the candidates (``always``: every one, when corrupt is all the
    space draws) when the space allows corrupt, on top of the ``max_faults`` drawn faults (a
    correct node survives one malformed message whatever else happens: it is at worst one lost
    message; a schedule already full would otherwise never get one): one message type, damaged in one of the first ``CORRUPT_NTH`` messages
    of that type (3 in 4: every receiver must survive one malformed message, and a share of a
    few percent of a rare type damages none in most runs) or in a share up to the effect's bound.

    Drawn from ``seed`` (the candidate's seed and its other faults: hypothesis repeats seeds
    across candidates), not from hypothesis: adding corrupt to the vocabulary leaves every other
    draw of a search as it was (the draws the bench's and the slow tests' figures were measured
    on), and a search still gives the same candidates every time."""
    if space.max_faults <= 0 or CORRUPT not in space.effects or RULE not in space.kinds or not space.messages:
        return []
    rng = random.Random(f"explore/corrupt/{seed}")
    if rng.random() >= CORRUPT_SHARE and not always:
        return []
    body: dict[str, Any] = {"message": rng.choice(space.messages), CORRUPT: list(space.damage) or True}
    if rng.random() < CORRUPT_ONE:
        body["nth"] = rng.randint(1, CORRUPT_NTH)
    else:
        p = rng.choice(space.probabilities(CORRUPT))
        if p < 1.0:
            body["probability"] = fmt_probability(p)
    return [{"rule": body}]
