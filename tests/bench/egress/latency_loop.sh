#!/bin/sh
# One round of the egress benchmark's client side: COUNT sequential curl runs, each a new process
# and so a new connection, printing curl's time_total (seconds, the transfer alone: name lookup,
# connect, request, response; not the process start) one a line. Runs on the host for the direct
# and sandbox-runtime rows and inside `cagent exec` for cagent's, so every row has the same client.
#
# usage: latency_loop.sh COUNT URL [CURL_OPTION...]
# Exit status: curl's first failure (its message on stderr), else 0.
set -eu
count=$1
url=$2
shift 2
i=0
while [ "$i" -lt "$count" ]; do
  curl -sS --fail --max-time 10 -o /dev/null -w '%{time_total}\n' "$@" "$url"
  i=$((i + 1))
done
