#!/usr/bin/env bash
# kvroute's block index on Dynamo's mooncake_bench workload (io.kvroute.benchmarks.trace.IndexTraceRun):
# the steady 30 s window, then the sweep, on the bundled Mooncake synthetic trace.
#
#   benchmarks/index-trace.sh                         # build the jar if missing; steady, then sweep
#   benchmarks/index-trace.sh --trace conversation_trace.jsonl   # any Mooncake-format trace (.gz ok)
#   BUILD=1 benchmarks/index-trace.sh                 # rebuild the jar first (reactor build, no install)
#
# Extra arguments go to both runs (--help lists them). The figures depend on the machine and its
# load: the CPU model and the load average are printed with them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
jar="$here/target/benchmarks.jar"
if [[ "${BUILD:-0}" == "1" || ! -f "$jar" ]]; then
  (cd "$root" && mvn -B -q -pl benchmarks -am package -DskipTests)
fi
main=io.kvroute.benchmarks.trace.IndexTraceRun
java ${JAVA_OPTS:--Xmx2g} -cp "$jar" "$main" --window-ms 30000 "$@"
java ${JAVA_OPTS:--Xmx2g} -cp "$jar" "$main" --sweep "$@"
