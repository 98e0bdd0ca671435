#!/usr/bin/env bash
# `cagent completion SHELL`: the script parses in that shell, names every subcommand cagent
# --help lists, and (bash) completes `cagent ex` to exec and `cagent policy ch` to check.
#   completion_test.sh bash|zsh|fish path/to/cagent
set -euo pipefail
shell=$1 cagent=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if ! command -v "$shell" >/dev/null; then
  echo "skipped: $shell is not installed (Debian: apt-get install $shell)"
  exit 77
fi
"$cagent" completion "$shell" > "$tmp/script" || fail "cagent completion $shell failed"
"$shell" -n "$tmp/script" || fail "$shell -n rejects the script"

# Every subcommand of `cagent --help` appears in the script.
subs=$("$cagent" --help | awk 'tolower($0) ~ /^subcommands:/ {on=1; next} on && /^$/ {on=0} on && /^  [a-z]/ {print $1}')
[ -n "$subs" ] || fail "no subcommands in cagent --help"
for s in $subs; do
  grep -qw -- "$s" "$tmp/script" || fail "subcommand $s is missing from the $shell script"
done
grep -q -- "--profile" "$tmp/script" || fail "exec's --profile is missing from the $shell script"

# An unknown shell is a usage error.
status=0; "$cagent" completion tcsh >/dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "cagent completion tcsh exited $status, not 2"

case $shell in
  bash)
    # shellcheck source=/dev/null
    source "$tmp/script"
    complete_words() {  # the candidates for the last word of "$@"
      COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
      _cagent
      printf '%s\n' "${COMPREPLY[@]}"
    }
    # (Here-strings, not pipes: under pipefail a grep -q that exits at its match can fail the
    # writer with SIGPIPE.)
    grep -qx exec <<<"$(complete_words cagent ex)" || fail "'cagent ex' does not complete to exec"
    grep -qx check <<<"$(complete_words cagent policy ch)" ||
      fail "'cagent policy ch' does not complete to check"
    grep -qx -- --profile <<<"$(complete_words cagent exec --pro)" ||
      fail "'cagent exec --pro' does not complete to --profile"
    # After --, the sandboxed command's words: nothing of cagent's.
    [ -z "$(complete_words cagent exec -- ex)" ] || fail "'cagent exec -- ex' offers cagent words"
    # --profile: the names `cagent policy list` finds (here a repository's .cagent/ beside the
    # built-ins), the cagent on PATH asked. A hostile file name there is neither offered nor run.
    mkdir -p "$tmp/bin" "$tmp/repo/.git" "$tmp/repo/.cagent"
    ln -s "$(cd "$(dirname "$cagent")" && pwd)/$(basename "$cagent")" "$tmp/bin/cagent"
    printf 'profile mine\nextends base\n' > "$tmp/repo/.cagent/mine.cagent"
    printf 'profile x\nextends base\n' > "$tmp/repo/.cagent/\$(touch pwned).cagent"
    printf 'profile y\nextends base\n' > "$tmp/repo/.cagent/\`touch pwned2\`.cagent"
    # The machine's own profiles (~/.config/cagent, $XDG_CONFIG_HOME) are kept out: a HOME of
    # the test's. On a failure, what `cagent policy list` saw there.
    mkdir -p "$tmp/home"
    in_repo() { (cd "$tmp/repo" && export HOME=$tmp/home PATH=$tmp/bin:$PATH &&
                 unset XDG_CONFIG_HOME CAGENT_CONFIG_DIR && "$@"); }
    profile_fail() {
      echo "cagent policy list in the repository:" >&2
      in_repo cagent policy list >&2 || true
      fail "$@"
    }
    words=$(in_repo complete_words cagent exec --profile '')
    grep -qx backend <<<"$words" || profile_fail "'cagent exec --profile ' does not offer backend: $words"
    grep -qx mine <<<"$words" || profile_fail "'--profile ' does not offer the repository's mine: $words"
    ! grep -q touch <<<"$words" || profile_fail "'--profile ' offers a name that is shell syntax: $words"
    words=$(in_repo complete_words cagent run --profile back)
    [ "$(sort <<<"$words" | tr '\n' ' ')" = "backend backend-registries " ] ||
      profile_fail "'cagent run --profile back' offers '$words'"
    [ ! -e "$tmp/repo/pwned" ] && [ ! -e "$tmp/repo/pwned2" ] ||
      fail "completing --profile ran a planted command"
    ;;
  zsh)
    # Loaded by compinit from a directory on fpath, as the package installs it.
    mkdir "$tmp/fpath"; cp "$tmp/script" "$tmp/fpath/_cagent"
    out=$(HOME=$tmp zsh -f -c 'fpath=("$1" $fpath); autoload -Uz compinit; compinit -u -d "$2/zcd";
      print -r -- ${_comps[cagent]}' zsh "$tmp/fpath" "$tmp")
    [ "$out" = _cagent ] || fail "compinit does not register _cagent for cagent (got '$out')"
    ;;
  fish)
    out=$(HOME=$tmp fish --no-config -c "source $tmp/script; complete -C'cagent ex'")
    grep -q '^exec' <<<"$out" || fail "fish: 'cagent ex' does not complete to exec: $out"
    out=$(HOME=$tmp fish --no-config -c "source $tmp/script; complete -C'cagent policy ch'")
    grep -q '^check' <<<"$out" || fail "fish: 'cagent policy ch' does not complete to check: $out"
    mkdir -p "$tmp/bin"
    ln -s "$(cd "$(dirname "$cagent")" && pwd)/$(basename "$cagent")" "$tmp/bin/cagent"
    out=$(HOME=$tmp PATH=$tmp/bin:$PATH fish --no-config -c "source $tmp/script; complete -C'cagent exec --profile back'")
    grep -q '^backend-registries' <<<"$out" || fail "fish: '--profile back' does not offer backend-registries: $out"
    ;;
esac
echo "ok: $shell completion"
