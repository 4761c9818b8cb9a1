#!/usr/bin/env bash
# The HTTP layer alone: the edge's NIO and epoll transports (kvindex-service's hand-written
# NioHttpServer, measured here before, was replaced by the edge), each answering a 400-byte JSON body from one event loop pinned to core 0, loaded
# by wrk pinned to core 1, interleaved rounds, medians. Needs wrk and a built benchmarks jar
# (mvn -B -q -DskipTests -pl benchmarks -am package).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JAR=${JAR:-$ROOT/benchmarks/target/benchmarks.jar}
KINDS=${KINDS:-"edge-nio edge-epoll"}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-10s}
CONCS=${CONCS:-"1 32"}
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
cat >"$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","prompt":"hello","max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.0f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99)))
end
LUA
port=18300
declare -A PORT SPID
for k in $KINDS; do
  port=$((port + 1)); PORT[$k]=$port
  taskset -c 0 java -Xms256m -Xmx256m ${JAVA_OPTS:-} -cp "$JAR" io.kvroute.benchmarks.edge.EdgeEchoServer "$k" "$port" \
    >"$WORK/$k.log" 2>&1 &
  PIDS+=($!); SPID[$k]=$!
done
# server CPU time (user + system, clock ticks) from /proc: CPU per request does not depend on how
# much of the core other processes take, unlike req/s on a shared machine
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
for k in $KINDS; do
  for _ in $(seq 100); do grep -q ready "$WORK/$k.log" 2>/dev/null && break; sleep 0.2; done
  taskset -c 1 wrk -t1 -c32 -d5s -s "$WORK/post.lua" "http://127.0.0.1:${PORT[$k]}/x" >/dev/null
done
for c in $CONCS; do
  for r in $(seq "$ROUNDS"); do
    for k in $KINDS; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      t0=$(ticks "${SPID[$k]}")
      out=$(taskset -c 1 wrk -t1 -c"$c" -d"$DUR" --latency -s "$WORK/post.lua" \
        "http://127.0.0.1:${PORT[$k]}/x")
      t1=$(ticks "${SPID[$k]}")
      res=$(grep '^RESULT' <<<"$out" | cut -d' ' -f2-)
      n=$(grep -o '[0-9]* requests in' <<<"$out" | cut -d' ' -f1)
      cpu_us=$(python3 -c "print(f'{($t1 - $t0) / $HZ * 1e6 / max(1, $n):.1f}')")
      echo "$c $r $k $load $res $cpu_us" | tee -a "$WORK/results.txt"
    done
  done
done
python3 - "$WORK/results.txt" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
for c in sorted({int(r[0]) for r in rows}):
    print(f"C={c}: medians (load {min(float(r[3]) for r in rows)}-{max(float(r[3]) for r in rows)})")
    for k in dict.fromkeys(r[2] for r in rows):
        v = [r for r in rows if int(r[0]) == c and r[2] == k]
        cpu = st.median(float(x[7]) for x in v)
        print(f"  {k:12s} {st.median(float(x[4]) for x in v):9.0f} req/s  p50 {st.median(int(x[5]) for x in v)/1000:.3f} ms  p99 {st.median(int(x[6]) for x in v)/1000:.3f} ms  server CPU {cpu:.1f} us/req (= {1e6/cpu:.0f} req/s per core)")
PY
