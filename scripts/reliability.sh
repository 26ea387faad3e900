#!/usr/bin/env bash
# The reliability report: bad input per entry point, hostile model files, fuzzing, kills during
# save, the soak and the stress test (generated and real SAM2.1 tiny models), the video soak and
# valgrind, in one table. Each figure comes from a run that measures it:
#
#   scripts/reliability.sh           run everything (about 20 minutes on 2 cores), then the table
#   scripts/reliability.sh --long    longer runs: fuzz 5 min a target, 1000 kills, a soak on the
#                                    SAM2-sized bench model too, longer soaks, 5 min of stress on
#                                    each model set (about 75 min)
#   scripts/reliability.sh --print   only print the table from the last run's figures
#
# scripts/test.sh produces the same figures in its own steps (short settings) and ends with
# --print. Figures are kept in $SAM2_REPORT_DIR (default target/reliability).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-standard}"
export SAM2_REPORT_DIR="${SAM2_REPORT_DIR:-$ROOT/target/reliability}"
mkdir -p "$SAM2_REPORT_DIR"

step() { printf '\n==> %s\n' "$*"; }

if [ "$MODE" != "--print" ]; then
    case "$MODE" in
        standard) fuzz_seconds=60; kills=500; stress=30; soak="600 6000"; real_stress=60; real_soak="40 400"; video_frames=1000 ;;
        --long) fuzz_seconds=300; kills=1000; stress=300; soak="2000 20000"; real_stress=300; real_soak="150 1500"; video_frames=3000 ;;
        *) echo "usage: $0 [--long | --print]" >&2; exit 2 ;;
    esac
    . tools/setup/setup.sh
    . tools/setup/setup-real.sh
    rm -f "$SAM2_REPORT_DIR"/*.tsv
    step "build (with the test hooks the C suite uses)"
    cargo build --release --lib --features test-support
    cmake -S tests/c -B build/c -DCMAKE_BUILD_TYPE=Release -DSAM2_LIB_DIR="$ROOT/target/release" >/dev/null
    cmake --build build/c -j 2 >/dev/null
    step "bad input on every entry point: the NULL sweep and every other bad value"
    (cd build/c && ctest --output-on-failure -R '^(test_null_sweep|test_bad_input)$')
    step "hostile model files: the real SAM2.1 tiny exports truncated, flipped, pointing outside, huge"
    cargo test --release --test it hostile_models::
    step "stress: ${stress} s on shared handles"
    (cd build/c && SAM2_STRESS_SECONDS="$stress" ./test_stress)
    step "stress on the real SAM2.1 tiny exports: ${real_stress} s"
    (cd build/c && SAM2_STRESS_MODELS=real SAM2_STRESS_SECONDS="$real_stress" ./test_stress)
    step "kill during save: $kills kills"
    SAM2_KILL_TRIALS="$kills" cargo test --release --test it embedding_file::kill_during_save -- --nocapture
    read -r encodes predicts <<<"$soak"
    step "soak: $encodes encodes, $predicts predicts (tiny models)"
    SAM2_SOAK_ENCODES="$encodes" SAM2_SOAK_PREDICTS="$predicts" \
        cargo test --release --test soak -- --nocapture
    read -r encodes predicts <<<"$real_soak"
    step "soak: $encodes encodes, $predicts predicts (the real SAM2.1 tiny pair)"
    SAM2_SOAK_PAIRS=real_samexporter SAM2_SOAK_ENCODES="$encodes" SAM2_SOAK_PREDICTS="$predicts" \
        SAM2_SOAK_REPORT=soak-real.tsv cargo test --release --test soak -- --nocapture
    step "video soak: two objects tracked through $video_frames frames (the generated tracker)"
    SAM2_VIDEO_SOAK_FRAMES="$video_frames" cargo test --release --test video_soak -- --nocapture
    if [ "$MODE" = "--long" ]; then
        step "soak on the bench model (SAM2-sized): 150 encodes, 1500 predicts"
        mv "$SAM2_REPORT_DIR/soak.tsv" "$SAM2_REPORT_DIR/soak-tiny.tsv"
        SAM2_SOAK_PAIRS=bench_a SAM2_SOAK_ENCODES=150 SAM2_SOAK_PREDICTS=1500 \
            cargo test --release --test soak -- --nocapture
        mv "$SAM2_REPORT_DIR/soak.tsv" "$SAM2_REPORT_DIR/soak-bench.tsv"
        mv "$SAM2_REPORT_DIR/soak-tiny.tsv" "$SAM2_REPORT_DIR/soak.tsv"
    fi
    step "fuzzing, ${fuzz_seconds} s a target"
    scripts/fuzz.sh "$fuzz_seconds"
    step "the C suite under valgrind"
    tools/ci/test-valgrind.sh
fi

exec python3 - "$SAM2_REPORT_DIR" "$ROOT/include/sam2.h" <<'EOF'
import csv, os, re, sys

report_dir, header = sys.argv[1], sys.argv[2]
missing, failed = [], []

def rows(name):
    path = os.path.join(report_dir, name)
    if not os.path.exists(path):
        missing.append(name)
        return []
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))

def line(text="", *cells):
    print(text + "".join(cells))

print("sam2 reliability report")
print("=" * 92)

# Bad input, per entry point of the header: NULL in every pointer argument
# (tests/c/test_null_sweep.c) and every other bad value (tests/c/test_bad_input.c).
declared = dict(re.findall(r"\b(sam2_[a-z0-9_]+)\(([^)]*)\)", open(header).read()))
exports = sorted(declared)
# Entry points that take arguments but have no row in the counted sweeps (their bad-input checks
# live in a test of their own, e.g. tests/c/test_everything.c): shown, not counted.
uncounted = []
nulls = {r["entry"]: r for r in rows("null_sweep.tsv")}
bad = {r["entry"]: r for r in rows("bad_input.tsv")}
if bad or nulls:
    line(f"{'Bad input (tests/c/test_null_sweep.c, test_bad_input.c)':<56}", f"{'NULL':>6}", f"{'values':>8}",
         f"{'handled':>9}", f"{'goal':>6}")
    tried = handled = null_total = 0
    for e in exports:
        n, v = nulls.get(e), bad.get(e)
        if n is None and v is None:
            takes_none = declared[e].strip() in ("", "void")
            if not takes_none:
                uncounted.append(e)
            note = "(no arguments)" if takes_none else "(not in the sweep)"
            line(f"  {e:<54}", f"{'-':>6}", f"{'-':>8}", f"{'-':>9}", f"{note:>20}")
            continue
        tn = int(n["inputs"]) if n else 0
        tv = int(v["inputs"]) if v else 0
        h = (int(n["handled"]) if n else 0) + (int(v["handled"]) if v else 0)
        tried, handled, null_total = tried + tn + tv, handled + h, null_total + tn
        line(f"  {e:<54}", f"{tn:>6}", f"{tv:>8}", f"{h:>9}", f"{'all':>6}", "" if h == tn + tv else "   NOT MET")
        if h != tn + tv:
            failed.append(f"bad input: {e}")
    line(f"  {'every entry point (' + str(len(exports)) + ')':<54}", f"{null_total:>6}", f"{tried - null_total:>8}",
         f"{handled:>9}", f"{'all':>6}", "" if tried == handled else "   NOT MET")
    if uncounted:
        print(f"  {len(uncounted)} entry points are not in the counted sweeps; their own tests check their bad input")
    print()

hostile = []
for kind in ["truncated", "bit_flipped", "external_data", "huge_dimensions"]:
    hostile += rows(f"hostile_{kind}.tsv")
if hostile:
    line(f"{'Hostile real-model files (tests/it/hostile_models.rs)':<56}", f"{'cases':>6}", f"{'refused':>8}",
         f"{'ran':>9}", f"{'other':>6}")
    what = {"truncated": "truncated: header, node list, a weight, the end",
            "bit_flipped": "a flipped bit (nodes, weights, tail): refused or runs",
            "external_data": "external data outside the directory, never opened",
            "huge_dimensions": "huge declared dimensions (inputs, initializers)"}
    for r in hostile:
        bad_cases = int(r["failed"])
        line(f"  {what.get(r['kind'], r['kind']):<54}", f"{r['cases']:>6}", f"{r['model_errors']:>8}", f"{r['ran']:>9}",
             f"{bad_cases:>6}", "" if bad_cases == 0 else "   NOT MET")
        if bad_cases:
            failed.append(f"hostile models: {r['kind']}")
    print()

fuzz = rows("fuzz.tsv")
if fuzz:
    line(f"{'Fuzzing (scripts/fuzz.sh; crashes stop the run)':<60}", f"{'seconds':>10}", f"{'executions':>12}", f"{'crashes':>8}")
    total = 0
    for r in fuzz:
        total += int(r["executions"])
        line(f"  {r['target']:<58}", f"{r['seconds']:>10}", f"{int(r['executions']):>12,}", f"{0:>8}")
    line(f"  {'all targets':<58}", f"{'':>10}", f"{total:>12,}", f"{0:>8}")
    print()

kill = rows("kill_during_save.tsv")
if kill:
    r = kill[0]
    line(f"{'Kill during save (tests/it/embedding_file.rs)':<60}", f"{'kills':>10}", f"{'mid-write':>10}", f"{'lost':>8}", f"{'goal':>6}")
    lost = int(r["lost"])
    line(f"  {'target file always the complete old or new one':<58}", f"{r['trials']:>10}", f"{r['mid_write']:>10}",
         f"{lost:>8}", f"{0:>6}", "" if lost == 0 else "   NOT MET")
    if lost:
        failed.append("kill during save")
    print()

mib = lambda b: int(b) / (1 << 20)
for name, title in [("soak.tsv", "tiny models"), ("soak-real.tsv", "real SAM2.1 tiny"), ("soak-bench.tsv", "bench model")]:
    soak = rows(name) if name != "soak-bench.tsv" or os.path.exists(os.path.join(report_dir, name)) else []
    for r in soak:
        line(f"Soak (tests/soak.rs), {title}: {r['pairs']}, {r['encodes']} encodes, {r['predicts']} predicts")
        met = True
        for label, warm, end, goal in [("heap in use (glibc) after warm-up -> end (MiB)", "heap_warm", "heap_end", "heap_goal"),
                                       ("ONNX Runtime CPU arena after warm-up -> end (MiB)", "arena_warm", "arena_end", "arena_goal"),
                                       ("resident memory after warm-up -> end (MiB)", "rss_warm", "rss_end", "rss_goal")]:
            g, bound = int(r[end]) / max(1, int(r[warm])), float(r[goal])
            met &= g <= bound
            line(f"  {label:<58}", f"{mib(r[warm]):>10.1f}", f"{mib(r[end]):>10.1f}",
                 f"{g:>7.3f}x", f"{'<=' + r[goal] + 'x':>8}", "" if g <= bound else "   NOT MET")
        calls = int(r.get("failed") or 0)
        line(f"  {'calls that failed':<58}", f"{'':>10}", f"{calls:>10}", f"{'':>8}", f"{'0':>8}", "" if calls == 0 else "   NOT MET")
        if not met or calls:
            failed.append(f"soak ({title})")
        print()

for r in rows("video_soak.tsv"):
    line(f"Video soak (tests/video_soak.rs), generated tracker: {r['objects']} objects, {r['frames']} frames "
         f"(warm-up {r['warm_up']})")
    met = True
    for label, warm, end, goal in [("heap in use (glibc) after warm-up -> end (MiB)", "heap_warm", "heap_end", "heap_goal"),
                                   ("resident memory after warm-up -> end (MiB)", "rss_warm", "rss_end", "rss_goal")]:
        g, bound = int(r[end]) / max(1, int(r[warm])), float(r[goal])
        met &= g <= bound
        line(f"  {label:<58}", f"{mib(r[warm]):>10.1f}", f"{mib(r[end]):>10.1f}",
             f"{g:>7.3f}x", f"{'<=' + r[goal] + 'x':>8}", "" if g <= bound else "   NOT MET")
    line(f"  {'ONNX Runtime CPU arena after warm-up -> end (MiB)':<58}", f"{mib(r.get('arena_warm') or 0):>10.1f}",
         f"{mib(r.get('arena_end') or 0):>10.1f}", f"{int(r.get('arena_end') or 0) / max(1, int(r.get('arena_warm') or 0)):>7.3f}x")
    held, expected = int(r.get("memory_frames") or 0), int(r.get("memory_frames_expected") or 0)
    line(f"  {'memory frames held at the end (each object: 1 + memory_frames)':<58}", f"{'':>10}", f"{held:>10}",
         f"{'':>8}", f"{expected:>8}", "" if held == expected else "   NOT MET")
    calls = int(r["failed"])
    line(f"  {'calls that failed':<58}", f"{'':>10}", f"{calls:>10}", f"{'':>8}", f"{'0':>8}", "" if calls == 0 else "   NOT MET")
    if not met or calls or held != expected:
        failed.append("video soak")
    print()

for name, title in [("stress.tsv", "tiny models"), ("stress-real.tsv", "real SAM2.1 tiny")]:
    stress = rows(name)
    if not stress:
        continue
    r = stress[0]
    line(f"{'Stress (test_stress.c), ' + title + ', shared handles':<60}", f"{'iterations':>10}", f"{'mismatch':>10}", f"{'failed':>8}", f"{'goal':>6}")
    bad_results = int(r["mismatches"]) + int(r["failures"])
    line(f"  {r['threads'] + ' threads, ' + r['seconds'] + ' s (' + r['predicts'] + ' predicts, ' + r['encodes'] + ' encodes, ' + r['files'] + ' file round trips)':<58}",
         f"{r['iterations']:>10}", f"{r['mismatches']:>10}", f"{r['failures']:>8}", f"{0:>6}", "" if bad_results == 0 else "   NOT MET")
    if bad_results:
        failed.append(f"stress ({title})")
    print()

vg = rows("valgrind.tsv")
if vg:
    r = vg[0]
    line(f"{'Valgrind memcheck (tools/ci/test-valgrind.sh)':<60}", f"{'programs':>10}", f"{'clean':>10}")
    line(f"  {'generated-model C programs: no invalid access, no leak':<58}", f"{r['programs']:>10}", f"{r['clean']:>10}",
         "" if r["programs"] == r["clean"] else "   NOT MET")
    if r["programs"] != r["clean"]:
        failed.append("valgrind")
    print()

if missing:
    print("figures not produced by this run: " + ", ".join(missing))
if failed:
    print("goals NOT MET: " + ", ".join(failed))
    sys.exit(1)
print("every figure measured here meets its goal")
EOF
