"""Cost of ``layerscope.trace_point`` when nothing records, against the cheapest things it could be.

Usage: ``.venv/bin/python benchmarks/trace_point_overhead.py [--number 200000] [--rounds 7]``

Four statements, each timed with ``timeit`` (``--number`` executions per round, ``--rounds`` rounds, the
statements alternating within a round so that drifting machine load hits all alike; the minimum over the
rounds is reported, as ``timeit`` recommends for micro-benchmarks):

- ``with nullcontext(): pass`` -- the baseline for the context-manager form;
- ``with trace_point("nms"): pass`` -- the object is built on every execution, as user code writes it;
- ``f()`` for an empty function -- the baseline for the decorator form;
- ``g()`` for the same function decorated with ``@trace_point("decode")``.

Printed: ns per call, the ratio to its baseline and the difference in ns; for information, the same two
trace-point forms while a recording is active. Goal: each trace-point form under 1 µs per call when not
recording. Exit status: 0 when the goal is met, 1 when it is not.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from contextlib import nullcontext

from layerscope.runtimes.machine import machine_info
from layerscope.tracing import recording, trace_point

GOAL_NS = 1000.0


def empty() -> None:
    """The baseline function."""


@trace_point("decode")
def decorated() -> None:
    """The same empty function, traced."""


STATEMENTS = {
    "with nullcontext()": ("with nullcontext(): pass", {"nullcontext": nullcontext}),
    "with trace_point()": ('with trace_point("nms"): pass', {"trace_point": trace_point}),
    "empty f()": ("f()", {"f": empty}),
    "@trace_point f()": ("f()", {"f": decorated}),
}
PAIRS = (("with trace_point()", "with nullcontext()"), ("@trace_point f()", "empty f()"))


def best_ns(number: int, rounds: int) -> dict[str, float]:
    """Minimum over ``rounds`` of the time per execution (ns) of every statement, alternating within a round."""
    timers = {name: timeit.Timer(stmt, globals=env) for name, (stmt, env) in STATEMENTS.items()}
    best = {name: float("inf") for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(number) / number * 1e9)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000, help="executions per round (default 200000)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    args = parser.parse_args(argv)

    off = best_ns(args.number, args.rounds)
    with recording():
        on = best_ns(max(1, args.number // 10), args.rounds)  # spans pile up while recording: fewer of them
    machine = machine_info()
    print(f"machine   {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    print(f"method    timeit, {args.rounds} rounds x {args.number} executions, statements alternating; "
          "minimum per call")
    print()
    print(f"{'statement':<20} {'ns/call':>8}  {'baseline':<20} {'ns/call':>8}  {'ratio':>6}  {'added ns':>8}")
    ok = True
    for traced, baseline in PAIRS:
        ratio = off[traced] / off[baseline]
        print(f"{traced:<20} {off[traced]:8.1f}  {baseline:<20} {off[baseline]:8.1f}  {ratio:6.2f}  "
              f"{off[traced] - off[baseline]:8.1f}")
        ok = ok and off[traced] < GOAL_NS
    print()
    print("recording (for information: a span is kept per call)")
    for traced, _ in PAIRS:
        print(f"{traced:<20} {on[traced]:8.1f} ns/call")
    print()
    print(f"goal: trace_point when not recording < {GOAL_NS:.0f} ns per call (both forms): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
