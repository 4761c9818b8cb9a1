#!/usr/bin/env bash
# Runs the hot kvroute benchmarks interleaved with their floors and prints the ratio table
# (io.kvroute.benchmarks.FloorTable), with the CPU model, JDK and load average.
#
#   benchmarks/run.sh                      # build the jar if missing, 3 rounds
#   benchmarks/run.sh --rounds 5           # more rounds: medians get steadier
#   benchmarks/run.sh --only 'lookup'      # rows whose label matches a regex
#   BUILD=1 benchmarks/run.sh              # rebuild the jar first (reactor build, no install)
#
# Other options: --warmup N --iterations N --time SECONDS (per JMH run; defaults 3, 4, 2).
# Absolute numbers on a shared machine are noisy; compare the ratios, and run when the load
# average is low (it is printed before every round).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
jar="$here/target/benchmarks.jar"
if [[ "${BUILD:-0}" == "1" || ! -f "$jar" ]]; then
  (cd "$root" && mvn -B -q -pl benchmarks -am package -DskipTests)
fi
echo "== machine"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|L3 cache)' || true
echo "== JDK"
java -version 2>&1
echo "== load: $(uptime)"
java ${JAVA_OPTS:-} -cp "$jar" io.kvroute.benchmarks.FloorTable "$@"
echo "== load after: $(uptime)"
