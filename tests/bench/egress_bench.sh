#!/usr/bin/env bash
# Egress benchmark: what cagent's filtering proxy adds to a connection and to a download, side by
# side in one run with sandbox-runtime's proxy (npm @anthropic-ai/sandbox-runtime, pinned in
# tests/bench/egress/package.json) and with no proxy at all. See docs/performance.md.
#
# usage: tests/bench/egress_bench.sh [BUILD_DIR] [--quick] [--json FILE] [--conns N]
#                                    [--rounds N] [--runs N] [--size BYTES] [--no-srt]
#                                    [--no-cagent] [--tls]
#
#   BUILD_DIR    the CMake build directory (default: build); needs launcher/cagent built in it
#   --quick      fewer samples and a 128 MiB download instead of 1 GiB (a smoke run)
#   --json FILE  also write the results as JSON
#   --conns N    connections measured per path (default 500; --quick 100)
#   --rounds N   the paths take turns this many times, conns/rounds connections each (default 5)
#   --runs N     downloads per path (default 5; --quick 3)
#   --size BYTES the download's size (default 1073741824; --quick 134217728)
#   --no-srt     leave sandbox-runtime out (it needs node and `npm ci` in tests/bench/egress)
#   --no-cagent  leave cagent out (e.g. a build without --allow-host)
#   --tls        also HTTPS (needs openssl): a TLS server beside the plain one, and the rows
#                direct-tls, cagent-tunnel-tls (CONNECT, tunnelled: TLS end to end) and
#                cagent-intercept-tls (a credential bound to the host: cagent terminates TLS
#                with the sandbox's CA, swaps the placeholder, verifies the server itself);
#                each compared with direct-tls
#
# What runs: tests/egress_fixtures/serve.py on 127.0.0.2 (a 24-byte file and a /bytes/N stream
# sent with sendfile), the name pkgs.test pointed at it. Every row uses the same client, curl, one
# process and so one new connection per request (tests/bench/egress/latency_loop.sh), timed by
# curl's own time_total (the transfer, not the process start):
#   direct               curl on the host straight to the server (--resolve)
#   srt-forward          curl on the host through sandbox-runtime's HTTP proxy, plain forwarding
#   srt-connect          the same through a CONNECT tunnel (curl --proxytunnel)
#   cagent-forward       curl inside `cagent exec --allow-host pkgs.test:PORT --resolve ...`,
#                        through cagent's proxy from the proxy variables set inside
#   cagent-connect       the same through a CONNECT tunnel
#   cagent-transparent   curl --noproxy '*' inside the sandbox: cagent's DNS stub and transparent
#                        capture
# A cagent row starts one sandbox per round, outside the timed transfers. Latency: p50 and p90 of
# the connections, "added" = p50 minus direct's p50. Throughput: the median download speed and
# its share of direct's. Targets (issue 16): <= 1 ms added per connection (p50), >= 80 % of direct
# throughput.
#
# Exit status: 0 done; 1 a measurement failed (the message names it); 2 usage error or a missing
# prerequisite.
set -euo pipefail

prog=${0##*/}
die() {
  echo "$prog: $1" >&2
  exit "${2:-2}"
}

src=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=build
quick=0
json=
conns=
rounds=5
runs=
size=
use_srt=1
use_cagent=1
use_tls=0
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --json) json=${2:?--json needs a value}; shift 2 ;;
    --conns) conns=${2:?--conns needs a value}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --runs) runs=${2:?--runs needs a value}; shift 2 ;;
    --size) size=${2:?--size needs a value}; shift 2 ;;
    --no-srt) use_srt=0; shift ;;
    --no-cagent) use_cagent=0; shift ;;
    --tls) use_tls=1; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build_dir=$1; shift ;;
  esac
done
if ((quick)); then
  conns=${conns:-100}
  runs=${runs:-3}
  size=${size:-134217728}
else
  conns=${conns:-500}
  runs=${runs:-5}
  size=${size:-1073741824}
fi
for n in "$conns" "$rounds" "$runs" "$size"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "counts and sizes are positive integers, got '$n'"
done
((conns >= rounds)) || die "--conns must be at least --rounds"
per_round=$((conns / rounds))

python=/usr/bin/python3
[[ -x $python ]] || die "$python is missing (the fixture server needs it)"
command -v curl > /dev/null || die "curl is not installed (apt-get install curl)"
[[ -z $json ]] || json=$(realpath -m -- "$json")
cagent=
if ((use_cagent)); then
  cagent=$(realpath -m -- "$build_dir/launcher/cagent")
  [[ -x $cagent ]] || die "'$cagent' not found; build it (cmake --build $build_dir --target \
cagent) or pass --no-cagent"
  "$cagent" exec --help 2>&1 | grep -q -- '--allow-host' ||
    die "this cagent has no 'exec --allow-host' (filtered egress); pass --no-cagent"
fi
srt_dir=$src/tests/bench/egress
if ((use_srt)); then
  command -v node > /dev/null || die "node is not installed (apt-get install nodejs) or pass --no-srt"
  if [[ ! -d $srt_dir/node_modules/@anthropic-ai/sandbox-runtime ]]; then
    echo "$prog: installing sandbox-runtime (npm ci in $srt_dir)" >&2
    (cd "$srt_dir" && npm ci --no-audit --no-fund --loglevel=error > /dev/null) ||
      die "npm ci in $srt_dir failed; pass --no-srt to leave sandbox-runtime out"
  fi
fi

work=$(mktemp -d /tmp/cagent-egress-bench-XXXXXX)
chmod 0755 "$work"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT

# Starts a server in the background; its first stdout line (the port) into the variable $1.
start_server() {
  local var=$1 out=$work/$1.port
  shift
  "$@" > "$out" 2> "$work/$var.err" &
  pids+=($!)
  local _
  for _ in $(seq 100); do
    if [[ -s $out ]]; then
      printf -v "$var" '%s' "$(head -1 "$out")"
      return 0
    fi
    sleep 0.05
  done
  die "$var did not start: $(cat "$work/$var.err")" 1
}

port='' srt_port=''  # set by start_server
mkdir -p "$work/site" "$work/samples" "$work/ws"
printf 'cagent egress benchmark\n' > "$work/site/f"  # 24 bytes
start_server port "$python" "$src/tests/egress_fixtures/serve.py" --addr 127.0.0.2 \
  --root "$work/site" --blob-max "$size"
host=pkgs.test
direct=(--noproxy '*' --resolve "$host:$port:127.0.0.2")
if ((use_srt)); then
  start_server srt_port node "$srt_dir/srt_proxy.mjs" --allow "$host:$port" \
    --resolve "$host:127.0.0.2"
  srt=(--noproxy '' -x "http://127.0.0.1:$srt_port")
fi
if ((use_tls)); then
  command -v openssl > /dev/null || die "--tls needs openssl (apt-get install openssl)"
  bash "$src/tests/egress_fixtures/make_ca.sh" "$work/ca" "$host" > /dev/null ||
    die "making the test CA failed" 1
  tls_port=''
  start_server tls_port "$python" "$src/tests/egress_fixtures/serve.py" --addr 127.0.0.2 \
    --root "$work/site" --blob-max "$size" --tls-cert "$work/ca/leaf.pem" \
    --tls-key "$work/ca/leaf.key"
  # The trust bundle the direct and tunnelled rows give curl: the system's and the test CA, as
  # big as the one the intercepted row's sandbox gets (its bundle is the system's and the
  # sandbox's CA): curl parses the whole file for every connection (tens of ms for the system
  # bundle), which is the client's cost, not a proxy's.
  cat /etc/ssl/certs/ca-certificates.crt "$work/ca/ca.pem" > "$work/ws/ca.pem" 2> /dev/null ||
    cp "$work/ca/ca.pem" "$work/ws/ca.pem"
  # The intercepted row's profile: the host allowed, a credential bound to it.
  printf '%s\n' 'description "egress benchmark: an intercepted host"' 'extends base' \
    'network loopback' \
    'hosts {' "  allow $host:$tls_port" '}' 'credentials {' \
    "  tok env CAGENT_BENCH_TOKEN for $host:$tls_port" '}' > "$work/intercept.cagent"
  # Inside: the bearer header (with the placeholder) in a file for curl's -H @FILE, then the loop.
  # shellcheck disable=SC2016 # expanded inside the sandbox, not here
  printf '%s\n' 'printf "Authorization: Bearer %s\n" "$CAGENT_BENCH_TOKEN" > "$HOME/h"' \
    'exec sh "$(dirname "$0")/loop.sh" "$@" -H "@$HOME/h"' > "$work/ws/intercept_loop.sh"
fi
cp "$srt_dir/latency_loop.sh" "$work/ws/loop.sh"
chmod -R a+rX "$work"

cagent_exec() {
  "$cagent" exec -q -w "$work/ws" --allow-host "$host:$port" --resolve "$host:$port:127.0.0.2" \
    -- "$@"
}
cagent_exec_tls() {
  "$cagent" exec -q -w "$work/ws" --allow-host "$host:$tls_port" \
    --resolve "$host:$tls_port:127.0.0.2" -- "$@"
}
cagent_intercept() {
  CAGENT_BENCH_TOKEN=ghp_cagentBenchmarkToken0123456789abcdef SSL_CERT_FILE=$work/ca/ca.pem \
    "$cagent" exec -q -w "$work/ws" --profile "$work/intercept.cagent" \
    --resolve "$host:$tls_port:127.0.0.2" -- "$@"
}
# url MODE PATH: the URL of PATH on the server the path MODE talks to.
url() {
  case $1 in
    *-tls) echo "https://$host:$tls_port$2" ;;
    *) echo "http://$host:$port$2" ;;
  esac
}
# loop MODE COUNT URL [CURL_OPTION...]: COUNT timed GETs on the path MODE, their times on stdout.
loop() {
  local mode=$1
  shift
  case $mode in
    direct-tls)
      sh "$work/ws/loop.sh" "$1" "$2" --noproxy '*' --resolve "$host:$tls_port:127.0.0.2" \
        --cacert "$work/ws/ca.pem" "${@:3}"
      ;;
    cagent-tunnel-tls) cagent_exec_tls sh "$work/ws/loop.sh" "$1" "$2" --cacert "$work/ws/ca.pem" \
      "${@:3}" ;;
    cagent-intercept-tls) cagent_intercept sh "$work/ws/intercept_loop.sh" "$@" ;;
    direct) sh "$work/ws/loop.sh" "$1" "$2" "${direct[@]}" "${@:3}" ;;
    srt-forward) sh "$work/ws/loop.sh" "$1" "$2" "${srt[@]}" "${@:3}" ;;
    srt-connect) sh "$work/ws/loop.sh" "$1" "$2" "${srt[@]}" --proxytunnel "${@:3}" ;;
    cagent-forward) cagent_exec sh "$work/ws/loop.sh" "$@" ;;
    cagent-connect) cagent_exec sh "$work/ws/loop.sh" "$1" "$2" --proxytunnel "${@:3}" ;;
    cagent-transparent) cagent_exec sh "$work/ws/loop.sh" "$1" "$2" --noproxy '*' "${@:3}" ;;
  esac
}
modes=(direct)
((use_srt)) && modes+=(srt-forward srt-connect)
((use_cagent)) && modes+=(cagent-forward cagent-connect cagent-transparent)
((use_tls)) && modes+=(direct-tls)
((use_tls && use_cagent)) && modes+=(cagent-tunnel-tls cagent-intercept-tls)

echo "$prog: ${modes[*]}; $conns connections in $rounds rounds, $runs downloads of $size bytes" >&2
for mode in "${modes[@]}"; do  # warm-up: caches, the proxies' first connections
  loop "$mode" 5 "$(url "$mode" /f)" > /dev/null || die "$mode: the warm-up GET failed" 1
done
for ((r = 0; r < rounds; r++)); do
  for mode in "${modes[@]}"; do
    loop "$mode" "$per_round" "$(url "$mode" /f)" >> "$work/samples/latency.$mode" ||
      die "$mode: a GET of $(url "$mode" /f) failed (round $((r + 1)))" 1
  done
done
for ((r = 0; r < runs; r++)); do
  for mode in "${modes[@]}"; do
    loop "$mode" 1 "$(url "$mode" "/bytes/$size")" --max-time 300 \
      --write-out '%{speed_download}\n' > "$work/speed.one" ||
      die "$mode: the download of $(url "$mode" "/bytes/$size") failed" 1
    # loop.sh prints time_total first; the later --write-out wins, so one line: the speed.
    tail -1 "$work/speed.one" >> "$work/samples/speed.$mode"
  done
done

commit=$(git -C "$src" rev-parse --short HEAD 2> /dev/null || echo unknown)
git -C "$src" diff --quiet HEAD 2> /dev/null || commit="$commit+dirty"
srt_version=
((use_srt)) && srt_version=$(node -p \
  "require('$srt_dir/node_modules/@anthropic-ai/sandbox-runtime/package.json').version")
echo "commit $commit, $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) cores, \
$(curl --version | head -1 | cut -d' ' -f1-2)${srt_version:+, sandbox-runtime $srt_version \
on node $(node --version)}"
echo
meta=(--meta "commit=$commit" --meta "size_bytes=$size" --meta "connections=$conns"
  --meta "kernel=$(uname -r)" --meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
[[ -z $srt_version ]] || meta+=(--meta "sandbox_runtime=$srt_version")
"$python" "$srt_dir/summarize.py" "$work/samples" ${json:+--json "$json"} "${meta[@]}"
