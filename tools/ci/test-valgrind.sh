#!/usr/bin/env bash
# Runs every program of the C suite on the generated models under valgrind memcheck: each test ctest
# knows (read from `ctest --show-only=json-v1`, with its arguments and environment) but those
# labelled real_models (tests/c/CMakeLists.txt: the real exports alone, minutes a load under
# valgrind), two at a time, the longest first. No invalid access, no use of uninitialised memory,
# and no definite or indirect leak may be reported; each program's CPU seconds are printed (the
# test command's timing table lists those over 30 s), and its wall seconds where it mostly waited.
#
# Under valgrind the programs see SAM2_TEST_UNDER_VALGRIND=1: every code path still runs, with
# fewer repetitions (valgrind runs ONNX Runtime ~50x slower), the parts on the real exports are
# skipped (test_bad_input's hostile real copies), and the probes that read freed handles on
# purpose (type tags) are skipped, since valgrind rightly reports those reads.
# Suppressions (tests/c/valgrind.supp) cover the dynamic loader and ONNX Runtime internals only.
# Expects the C suite built in build/c (scripts/test.sh does that first).
#   tools/ci/test-valgrind.sh [test-name-regex]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
command -v valgrind >/dev/null 2>&1 || {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null
}
cd "$ROOT/build/c"
ctest --show-only=json-v1 > valgrind-tests.json
exec python3 - "$ROOT" "${1:-.}" <<'EOF'
import concurrent.futures, json, os, re, subprocess, sys, time

root, pattern = sys.argv[1], re.compile(sys.argv[2])
tests = json.load(open("valgrind-tests.json"))["tests"]
jobs = []
for t in tests:
    command = t.get("command") or []
    # Only the programs built here; header_names is a CMake script.
    if not command or not pattern.search(t["name"]) or os.path.basename(command[0]) == "cmake":
        continue
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    if "real_models" in props.get("LABELS", []):
        print(f"valgrind {t['name']:<34} left out (real exports; ctest runs it)", flush=True)
        continue
    env = dict(os.environ)
    env.update(v.split("=", 1) for v in props.get("ENVIRONMENT", []))
    env["SAM2_TEST_UNDER_VALGRIND"] = "1"
    # Their figures under valgrind (shorter runs) must not replace the report's.
    env.pop("SAM2_REPORT_DIR", None)
    jobs.append((t["name"], command, env))

def run(job):
    """Runs one program under valgrind: its exit status, its CPU seconds (valgrind runs a program's
    threads one at a time, so alone on a core that is its wall time; beside the Rust suites, at
    the lowest priority, its wall time is mostly waiting), its wall seconds and its log."""
    name, command, env = job
    start = time.time()
    log = f"valgrind-{name}.log"
    with open(log, "w") as out:
        child = subprocess.Popen(
            ["valgrind", "-q", f"--suppressions={root}/tests/c/valgrind.supp",
             "--leak-check=full", "--show-leak-kinds=definite,indirect",
             "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99"] + command,
            env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return name, child.returncode, usage.ru_utime + usage.ru_stime, time.time() - start, log

# The longest programs first (their CPU seconds in the last run, kept beside the logs), so that two
# workers finish together instead of one running the slowest program alone at the end. Before a
# first run here, the seconds of the slowest ones on 2 idle cores (2026-12-03) order them.
times_file = "valgrind-seconds.json"
try:
    last = json.load(open(times_file))
except (OSError, ValueError):
    last = {"test_segment": 92, "test_tracker": 92, "test_bad_input": 86, "test_threads": 77,
            "test_embedding_files": 56, "test_lifecycle": 47, "test_everything": 40}
jobs.sort(key=lambda job: -last.get(job[0], 0))
failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    for name, rc, seconds, wall, log in pool.map(run, jobs):
        last[name] = round(seconds, 1)
        took = f"({seconds:.0f} s of CPU)"
        if wall > 1.5 * seconds + 5:
            took += f" in {wall:.0f} s"
        if rc == 0:
            print(f"valgrind {name:<34} clean {took}", flush=True)
        else:
            failed.append(name)
            what = "memcheck errors" if rc == 99 else f"exit status {rc}"
            print(f"valgrind {name:<34} FAILED: {what} {took}; build/c/{log}:")
            sys.stdout.write(open(log).read()[-6000:])
json.dump(last, open(times_file, "w"))
print(f"valgrind: {len(jobs) - len(failed)} of {len(jobs)} programs clean")
if os.environ.get("SAM2_REPORT_DIR"):
    with open(os.path.join(os.environ["SAM2_REPORT_DIR"], "valgrind.tsv"), "w") as f:
        f.write(f"programs\tclean\n{len(jobs)}\t{len(jobs) - len(failed)}\n")
sys.exit(1 if failed else 0)
EOF
