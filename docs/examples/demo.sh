#!/bin/sh
# The built-in demonstration: run by `cagent exec` (see README.md), it shows from the inside what
# the sandbox lets a command see and do. Every "denied" line is the kernel saying no.
say() { printf '\n== %s\n' "$*"; }
try() { # try DESCRIPTION COMMAND...: run COMMAND, report allowed/denied with its error
  desc=$1; shift
  if out=$("$@" 2>&1); then echo "  allowed: $desc"; else echo "  denied:  $desc -> ${out##*: }"; fi
}

say "identity: the caller's uid, no capabilities, no new privileges"
id
grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status | sed 's/^/  /'

say "the filesystem: a fresh root holding only what the sandbox names"
echo "  / contains: $(ls / | tr '\n' ' ')"
echo "  workspace: $PWD"
try "write a file in the workspace" sh -c 'echo hello > demo-output.txt'
try "write into /usr" touch /usr/cagent-demo
try "write into /etc" touch /etc/cagent-demo
try "create a file at /" touch /cagent-demo
try "write to the private /tmp (gone when the sandbox ends)" touch /tmp/scratch
echo "  /etc/shadow is $(wc -c < /etc/shadow) bytes here (hidden)"
echo "  HOME=$HOME, a private tmpfs: $(ls -A "$HOME" | wc -l) entries"

say "processes: only the sandbox's own"
for p in /proc/[0-9]*; do printf '  pid %-4s %s\n' "${p#/proc/}" "$(tr '\0' ' ' < "$p/cmdline" | sed 's/ *$//')"; done

say "network: a namespace of its own with only loopback"
echo "  interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"

say "environment: scrubbed (nothing from the caller but what the profile passes)"
env | sort | sed 's/^/  /'

say "done: exit status 0 is passed back to the caller"
