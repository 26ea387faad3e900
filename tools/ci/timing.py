#!/usr/bin/env python3
"""The timing table of the test command (scripts/test.sh prints it at the end, failed or not, and
writes it to target/reliability/timing.txt).

Reads what scripts/test.sh and the set-up scripts leave in DIR (target/reliability/timing/):
  stages.tsv   one line a stage (scripts/test.sh's `step`): name, seconds, outcome
  setup.tsv    one line a set-up step (tools/setup/setup.sh, setup-real.sh, setup-video.sh): name,
               `ran` or `cached`, seconds
  load.txt     /proc/loadavg when the run started
  *.log        the output of the suites that run many programs: cargo test (libtest's
               `finished in` line of each test binary), ctest (its seconds a test),
               tools/ci/test-valgrind.sh (its CPU seconds a program) and
               tools/ci/test-windows.sh (its seconds a build and a program under Wine)
and lists every stage, every set-up step, and every test binary or program that took over
--over seconds (30) or failed.

    python3 tools/ci/timing.py DIR [--over SECONDS]
"""

import argparse
import os
import re
import sys

RUNNING = re.compile(r"^\s+Running (\S+)(?: \((\S+)\))?")
DOCTESTS = re.compile(r"^\s+Doc-tests (\S+)")
RESULT = re.compile(r"^test result: (\w+)\..*finished in ([\d.]+)s")
CTEST = re.compile(r"Test\s+#\d+: (\S+) \.*\s*(?:\*+)?\s*(\w[\w ]*?)\s+([\d.]+) sec")
VALGRIND = re.compile(r"^valgrind (\S+)\s+(clean|FAILED[^(]*?)\s*\((\d+) s(?: of CPU)?\)")
# tools/ci/test-windows.sh: "[windows] ok: test_x under Wine (12 s)",
# "[windows] built: sam2.dll (40 s)"
WINDOWS = re.compile(r"^\[windows\] (ok|built): (.+?)(?: under Wine)? \((\d+) s\)")


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def programs(log_path):
    """(suite, name, seconds, outcome) of each program in one log."""
    suite = os.path.basename(log_path)[:-4]
    out = []
    current = None
    with open(log_path, errors="replace") as f:
        for line in f:
            m = RUNNING.match(line)
            if m:
                if current:
                    out.append((suite, current, None, "no result (stopped or crashed)"))
                current = m.group(1)
                continue
            m = DOCTESTS.match(line)
            if m:
                if current:
                    out.append((suite, current, None, "no result (stopped or crashed)"))
                current = "doc-tests " + m.group(1)
                continue
            m = RESULT.match(line)
            if m and current:
                out.append((suite, current, float(m.group(2)), m.group(1)))
                current = None
                continue
            m = CTEST.search(line)
            if m:
                out.append((suite, m.group(1), float(m.group(3)), m.group(2).strip().lower()))
                continue
            m = VALGRIND.match(line)
            if m:
                out.append((suite, m.group(1), float(m.group(3)), m.group(2).strip().rstrip(":")))
                continue
            m = WINDOWS.match(line)
            if m:
                out.append((suite, m.group(2), float(m.group(3)), "ok"))
    if current:
        out.append((suite, current, None, "no result (stopped or crashed)"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--over", type=float, default=30.0)
    args = parser.parse_args()
    lines = []
    say = lines.append

    load_start = ""
    if os.path.exists(os.path.join(args.dir, "load.txt")):
        load_start = open(os.path.join(args.dir, "load.txt")).read().split()[:3]
    try:
        load_end = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load_end = []
    say("timing of the test command (seconds)")
    say("=" * 92)
    say(f"cores: {os.cpu_count()}; load average (1, 5, 15 min) at the start: "
        f"{' '.join(load_start) or 'unknown'}, at the end: {' '.join(load_end) or 'unknown'}")
    say("")

    stages = read_tsv(os.path.join(args.dir, "stages.tsv"))
    say(f"{'stage':<74} {'seconds':>8}  outcome")
    total = 0.0
    for name, seconds, outcome in stages:
        total += float(seconds)
        say(f"{name[:74]:<74} {float(seconds):>8.1f}  {outcome}")
    say(f"{'total':<74} {total:>8.1f}  ({total / 60:.1f} min)")
    say("")

    setup = read_tsv(os.path.join(args.dir, "setup.tsv"))
    if setup:
        # The suites that can run alone (tools/ci/test-csharp.sh, test-windows.sh, ...) source the
        # set-up again, which finds every step cached: one row a step, its first pass (the
        # set-up stage), with how often it was checked again (seconds counted in those stages).
        first = {}
        for name, status, seconds in setup:
            if name in first:
                first[name][2] += 1
            else:
                first[name] = [status, float(seconds), 0]
        say(f"{'set-up step':<74} {'seconds':>8}  ran or cached")
        for name, (status, seconds, again) in first.items():
            more = f" (checked {again} more time{'s' if again > 1 else ''})" if again else ""
            say(f"{name[:74]:<74} {seconds:>8.1f}  {status}{more}")
        say("")

    rows = []
    for log in sorted(f for f in os.listdir(args.dir) if f.endswith(".log")):
        for suite, name, seconds, outcome in programs(os.path.join(args.dir, log)):
            if seconds is None or seconds > args.over or outcome not in ("ok", "passed", "clean"):
                rows.append((suite, name, seconds, outcome))
    say(f"test binaries and programs over {args.over:.0f} s, or failed")
    if not rows:
        say("  none")
    for suite, name, seconds, outcome in rows:
        shown = "" if seconds is None else f"{seconds:.1f}"
        say(f"{suite:<18} {name[:55]:<55} {shown:>8}  {outcome}")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
