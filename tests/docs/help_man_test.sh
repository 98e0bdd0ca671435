#!/usr/bin/env bash
# `cagent ... --help` and the man page (docs/cagent.1) checked against each other: every
# subcommand the help lists is named in the man page, and so is every long option each
# subcommand's --help prints. A new option without a word in the manual fails here.
#
# usage: tests/docs/help_man_test.sh CAGENT_BINARY MAN_PAGE
set -euo pipefail
cagent=${1:?usage: help_man_test.sh CAGENT_BINARY MAN_PAGE}
man_page=${2:?usage: help_man_test.sh CAGENT_BINARY MAN_PAGE}

# The man page as plain words: roff's \- is a '-', \(lq and friends do not matter here.
manual=$(sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$man_page")

# The subcommands a help text lists, one per line ("Subcommands:" section of CLI11's help).
subcommands() {
  awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1; next} on && /^[^ ]/{on=0}' <<<"$1"
}
# The long options a help text lists (the option column only, not words in descriptions).
options() {
  grep -oE '^ +(-[a-zA-Z],)?--[a-z0-9][a-z0-9-]*' <<<"$1" | grep -oE -- '--[a-z0-9][a-z0-9-]*' |
    grep -vxE -- '--help|--help-all|--version' | sort -u || true
}

missing=0
checked=0
check() {  # WORDS...: the subcommand path
  local help
  help=$("$cagent" "$@" --help 2>&1) || {
    echo "FAIL: 'cagent $* --help' failed: $help"
    missing=$((missing + 1))
    return
  }
  local opt
  for opt in $(options "$help"); do
    checked=$((checked + 1))
    if ! grep -qF -- "$opt" <<<"$manual"; then
      echo "FAIL: 'cagent $* $opt' is in --help but not in $man_page"
      missing=$((missing + 1))
    fi
  done
  local sub
  for sub in $(subcommands "$help"); do
    checked=$((checked + 1))
    if ! grep -qwF -- "$sub" <<<"$manual"; then
      echo "FAIL: subcommand 'cagent $* $sub' is in --help but not in $man_page"
      missing=$((missing + 1))
    fi
    check "$@" "$sub"
  done
}

top=$("$cagent" --help)
for sub in $(subcommands "$top"); do
  checked=$((checked + 1))
  if ! grep -qwF -- "$sub" <<<"$manual"; then
    echo "FAIL: subcommand 'cagent $sub' is in --help but not in $man_page"
    missing=$((missing + 1))
  fi
  check "$sub"
done
# Twin: the check finds a word that is not in the manual (it is not vacuous).
if grep -qF -- "--cagent-no-such-option" <<<"$manual"; then
  echo "FAIL: the manual unexpectedly holds --cagent-no-such-option"
  missing=$((missing + 1))
fi
if [ "$checked" -lt 50 ]; then
  echo "FAIL: only $checked names checked; the help parsing lost its way"
  exit 1
fi
echo "$checked subcommands and options checked, $missing missing from the manual"
[ "$missing" -eq 0 ]
