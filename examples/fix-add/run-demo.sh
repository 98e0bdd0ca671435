#!/bin/sh
# The demo: a scratch git repository made from examples/fix-add/repo (a failing test), the task in
# task.md, and a recorded model session (session.jsonl) played by the replay provider, so no model
# provider or key is needed. Shows the live progress, the captured patch and the verification, then
# applies the verified patch to the scratch repository.
#
#   examples/fix-add/run-demo.sh [path/to/cagent]
#   sh /usr/share/cagent/examples/fix-add/run-demo.sh     (installed: the cagent on PATH)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# Default: the source tree's build, else (the installed copy of this script) cagent on PATH.
if [ $# -ge 1 ]; then
  cagent=$1
elif [ -x "$here/../../build/launcher/cagent" ]; then
  cagent=$here/../../build/launcher/cagent
else
  cagent=$(command -v cagent || echo cagent)
fi
# Absolute, since the demo runs from inside the scratch repository.
case $cagent in
  */*) cagent=$(cd "$(dirname "$cagent")" && pwd)/$(basename "$cagent") ;;
esac
[ -x "$cagent" ] || {
  echo "run-demo.sh: no cagent at '$cagent' (build it: cmake --build build; or install the package)" >&2
  exit 2
}
for tool in git python3; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "run-demo.sh: the demo needs $tool (the repository is git's; its test is Python):" \
      "sudo apt-get install git python3" >&2
    exit 2
  }
done
scratch=$(mktemp -d "${TMPDIR:-/tmp}/cagent-demo-XXXXXX")
cp -R "$here/repo/." "$scratch/"
git -C "$scratch" init -q -b main
git -C "$scratch" add -A
git -C "$scratch" -c user.name=demo -c user.email=demo@example.invalid commit -q -m "calc with a bug"
echo "== demo repository: $scratch (python3 -m unittest fails)"
cd "$scratch"
status=0
"$cagent" run --profile fix-add --model "replay:$here/session.jsonl" --approve never "$here/task.md" || status=$?
if [ "$status" -ne 0 ]; then
  echo "== the run did not complete (exit $status)"
  exit "$status"
fi
echo "== the captured patch (cagent diff last)"
"$cagent" diff last
echo "== applying the verified patch to $scratch (cagent apply last)"
"$cagent" apply last
python3 -m unittest -q
echo "== done: the scratch repository's tests pass with the agent's fix"
