"""``python -m layerscope.samples [NAME] [key=value ...]``: build a sample if needed, print its path.

Only the path goes to stdout (so ``$(python -m layerscope.samples)`` works in a shell); errors go
to stderr with exit status 2. ``--list`` prints the sample names, one a line.
"""

from __future__ import annotations

import argparse
import sys

from layerscope.samples import DEFAULT_SAMPLE, SAMPLES, parse_params, sample_path


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m layerscope.samples", description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", default=DEFAULT_SAMPLE,
                        help=f"sample name (default {DEFAULT_SAMPLE})")
    parser.add_argument("params", nargs="*", metavar="key=value", help="builder parameters, e.g. size=320")
    parser.add_argument("--cache-dir", default=None, help="folder for the built files (default: the cache)")
    parser.add_argument("--list", action="store_true", help="list the sample names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(SAMPLES))
        return 0
    try:
        params = parse_params(args.name, args.params)
        path = sample_path(args.name, cache_dir=args.cache_dir, **params)
    except (KeyError, TypeError, ValueError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
