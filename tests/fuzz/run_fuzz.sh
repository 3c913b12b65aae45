#!/usr/bin/env bash
# Run one libFuzzer target for a bounded time from its seed corpus and its regression inputs.
#   run_fuzz.sh TARGET CORPUS_DIR [REGRESSIONS_DIR]
#   HDX_FUZZ_RUNS     how many inputs to try (default 20000; 0 = no bound but the time)
#   HDX_FUZZ_SECONDS  how long to fuzz at most (default 120: a bound that the runs stay under)
# With a fixed seed and a bound on runs, a run is the same every time (CI never fails on a
# new random find); fuzz longer by hand with HDX_FUZZ_RUNS=0 HDX_FUZZ_SECONDS=600.
# The corpus is copied to a temporary directory, so new inputs never land in the source tree;
# a crashing input is kept in the working directory (ctest's: <build>/tests/fuzz) as
# <target>-crash-<sha1>, to be added under regressions/.
# Exit status: libFuzzer's (non-zero on a crash, leak, UB report, timeout or out-of-memory).
set -euo pipefail
target=$1 corpus=$2 regressions=${3:-}
seconds=${HDX_FUZZ_SECONDS:-120}
runs=${HDX_FUZZ_RUNS:-20000}

# Leaks inside system libraries that hangdx cannot free (each one explained there).
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

work=$(mktemp -d "${TMPDIR:-/tmp}/hdx-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cp -r "$corpus"/. "$work/corpus/"
dirs=("$work/corpus")
# Regression inputs first run as they are, each one on its own (a clear message names the
# input that fails), then join the corpus.
if [[ -n "$regressions" && -d "$regressions" ]] && compgen -G "$regressions/*" >/dev/null; then
  "$target" -rss_limit_mb=2048 -timeout=20 "$regressions"/*
  dirs+=("$regressions")
fi
runs_flag=()
[[ "$runs" != 0 ]] && runs_flag=(-runs="$runs")
exec "$target" "${runs_flag[@]}" -max_total_time="$seconds" -seed=1 -rss_limit_mb=2048 -timeout=20 \
  -artifact_prefix="$PWD/$(basename "$target")-" -print_final_stats=1 "${dirs[@]}"
