#!/usr/bin/env python3
"""Writes an extended copy of side_by_side.sh (the request-path comparison next to nginx, from the
project's measurement tools: ../shared/tools/side_by_side.sh in the founders' workspace) with:

- CPU time per request of each contender's process (utime + stime of the process and its
  children over each wrk run / the requests it answered): unlike req/s, it hardly depends on what
  else the machine runs, so it compares contenders on a shared machine;
- more contenders: kvgwb / kvproxyb (the gateway and the proxy of a second jar, JAR_B: a before/
  after in the same run), kvgwfc (the gateway with flowControl on, idle) and kvgwg1 (the gateway
  on G1); KV_JOPTS gives the kvroute JVMs' options (e.g. -XX:+UseParallelGC, as the launcher).

Usage: benchmarks/side_by_side_ext.py /path/to/side_by_side.sh /tmp/sbs_ext.sh
       JAR=new.jar JAR_B=old.jar KV_JOPTS=-XX:+UseParallelGC CONTENDERS="nginx kvgw kvgwb" \\
           PHASES=json CONCS="32 1" ROUNDS=5 DUR=8s WARM=15s /tmp/sbs_ext.sh
"""
import sys

s=open(sys.argv[1]).read()
def rep(a,b):
    global s
    assert a in s, a[:60]
    s=s.replace(a,b)
rep('P_NGINX=18110 P_TOY=18120 P_KVPROXY=18130 P_KVGW=18140 P_KVGWPD=18142',
 'P_NGINX=18110 P_TOY=18120 P_KVPROXY=18130 P_KVGW=18140 P_KVGWPD=18142 P_KVGWB=18146 P_KVGWFC=18144 P_KVGWG1=18148 P_KVPROXYB=18132\nJAR_B=${JAR_B:-$JAR}\nKV_JOPTS=${KV_JOPTS:-}')
rep('''start_kvproxy() { # $1 decode port
  taskset -c "$PROXY_CPU" java -Dsun.net.httpserver.nodelay=true -jar "$JAR" proxy --connector nixl \\
    --host 127.0.0.1 --port $P_KVPROXY \\''','''start_kvproxy() { # $1 decode port [$2 jar $3 port]
  taskset -c "$PROXY_CPU" java -Dsun.net.httpserver.nodelay=true $KV_JOPTS -jar "${2:-$JAR}" proxy --connector nixl \\
    --host 127.0.0.1 --port ${3:-$P_KVPROXY} \\''')
rep('''  - { id: d0, url: "http://127.0.0.1:$1", role: decode }
EOF
  taskset -c "$PROXY_CPU" java -Dsun.net.httpserver.nodelay=true -jar "$JAR" gateway \\''','''  - { id: d0, url: "http://127.0.0.1:$1", role: decode }
${5:-}
EOF
  taskset -c "$PROXY_CPU" java -Dsun.net.httpserver.nodelay=true ${6:-$KV_JOPTS} -jar "${4:-$JAR}" gateway \\''')
rep('''    kvgwpd) echo "http://127.0.0.1:$P_KVGWPD/v1/completions" ;;
  esac''','''    kvgwpd) echo "http://127.0.0.1:$P_KVGWPD/v1/completions" ;;
    kvgwb) echo "http://127.0.0.1:$P_KVGWB/v1/completions" ;;
    kvgwfc) echo "http://127.0.0.1:$P_KVGWFC/v1/completions" ;;
    kvgwg1) echo "http://127.0.0.1:$P_KVGWG1/v1/completions" ;;
    kvproxyb) echo "http://127.0.0.1:$P_KVPROXYB/v1/completions" ;;
  esac''')
rep('''      kvgwpd) start_kvgw $dport kvgwpd $P_KVGWPD ;; esac''','''      kvgwpd) start_kvgw $dport kvgwpd $P_KVGWPD ;;
      kvgwb) start_kvgw $dport kvgwb $P_KVGWB "$JAR_B" ;;
      kvproxyb) start_kvproxy $dport "$JAR_B" $P_KVPROXYB ;;
      kvgwfc) start_kvgw $dport kvgwfc $P_KVGWFC "$JAR" "flowControl: { tenantHeader: x-tenant-id }" ;;
      kvgwg1) start_kvgw $dport kvgwg1 $P_KVGWG1 "$JAR" "" "-XX:+UseG1GC" ;; esac''')
rep('''         "kvgwpd": "kvroute gateway always-PD (nixl)"}''','''         "kvgwpd": "kvroute gateway always-PD (nixl)", "kvgwb": "gateway decode-only, BEFORE jar",
         "kvgwfc": "gateway decode-only, flow control idle", "kvgwg1": "gateway decode-only, G1",
         "kvproxyb": "proxy nixl, BEFORE jar"}''')
rep('''    for who in ["direct", "nginx", "toy", "kvproxy", "kvgw", "kvgwpd"]:''','''    for who in ["direct", "nginx", "toy", "kvproxy", "kvproxyb", "kvgw", "kvgwb", "kvgwfc", "kvgwg1", "kvgwpd"]:''')
rep('''    for k in ["kvproxy", "kvgwpd", "kvgw"]:''','''    for k in ["kvproxy", "kvproxyb", "kvgwpd", "kvgw", "kvgwb", "kvgwfc", "kvgwg1"]:''')

def rep(a,b):
    global s
    assert a in s, a[:70]
    s=s.replace(a,b)
rep('''  for c in $CONTENDERS; do
    case $c in nginx) start_nginx_rp $dport ;;''','''  declare -A PIDOF=()
  for c in $CONTENDERS; do
    n0=${#CUR[@]}
    case $c in nginx) start_nginx_rp $dport ;;''')
rep('''      kvgwg1) start_kvgw $dport kvgwg1 $P_KVGWG1 "$JAR" "" "-XX:+UseG1GC" ;; esac
  done''','''      kvgwg1) start_kvgw $dport kvgwg1 $P_KVGWG1 "$JAR" "" "-XX:+UseG1GC" ;; esac
    PIDOF[$c]=${CUR[$n0]:-}
  done''')
rep('''        load=$(cut -d' ' -f1 /proc/loadavg)
        out=$(run_wrk "$(url_of $c $dport)" "$conc" "$DUR" "$lua")
        res=$(grep '^RESULT' <<<"$out" | cut -d' ' -f2-)''','''        load=$(cut -d' ' -f1 /proc/loadavg)
        cpid=${PIDOF[$c]:-}
        t0=$(cputicks $cpid)
        out=$(run_wrk "$(url_of $c $dport)" "$conc" "$DUR" "$lua")
        t1=$(cputicks $cpid)
        res=$(grep '^RESULT' <<<"$out" | cut -d' ' -f2-)
        nreq=$(cut -d' ' -f4 <<<"$res")
        printf 'CPU %s %s %s %s\\n' "$phase" "$conc" "$c" "$(awk -v t=$((t1-t0)) -v n="$nreq" 'BEGIN{ if (n>0) printf "%.2f", t*10000/n; else print "nan" }')" >>"$WORK/cpu.txt"''')
rep('''run_wrk() {''','''cputicks() { # utime+stime (ticks) of $1 and its children
  local s=0 p
  [ -z "${1:-}" ] && { echo 0; return; }
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    [ -r /proc/$p/stat ] && s=$((s + $(awk '{print $14+$15}' /proc/$p/stat)))
  done
  echo $s
}
run_wrk() {''')
s=s.rstrip()+'''
echo
echo "== CPU µs per request of each contender's process (median of rounds; utime+stime / requests)"
awk '{k=$2" c="$3" "$4; v[k]=v[k]" "$5} END {for (k in v) print k, v[k]}' "$WORK/cpu.txt" | sort | while read -r ph c who vals; do
  med=$(tr ' ' '\\n' <<<"$vals" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-5s %-6s %-9s median %8s   rounds:%s\\n' "$ph" "$c" "$who" "$med" "$vals"
done
'''
open(sys.argv[2], 'w').write(s)
