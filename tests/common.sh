# SPDX-License-Identifier: Apache-2.0
# common.sh: what the shell tests and benchmarks share, sourced by each:
#     . "$(dirname "$0")/../common.sh"      (from tests/DIR/ or bench/DIR/)
#
# Sourcing it gives:
# - $t, a scratch directory; at exit the script's background jobs (servers, processes holding
#   memory) are killed and $t removed (kept, and named, with KEEP=1). A script that has more to
#   clean up sets its own EXIT trap and calls cleanup from it.
# - fail=0, which `bad MESSAGE` sets to 1 after printing "FAIL MESSAGE"; a test ends `exit $fail`.
# - MiB, the figures' unit.
# - expect/absent NAME PATTERN FILE: a check on $t/FILE, where the scripts put the output of the
#   program under test ($t/out, $t/err), both shown when the check fails.
# - facts CMD... and fact NAME: the values of a checker's name=value lines.
# - waitfor CMD...: polls CMD for up to 10 s.
# - listen_port LOG [PID]: the port a gpucap server announced in its log.
# - preloaded LIB CMD ENV... -- ARGS...: CMD under a library, its output in $t/out and $t/err.

t=$(mktemp -d)
fail=0
MiB=$((1024 * 1024))

cleanup() {
    local jobs_
    jobs_=$(jobs -p)
    if [ -n "$jobs_" ]; then
        kill $jobs_ 2> /dev/null
        wait $jobs_ 2> /dev/null
    fi
    if [ -n "${KEEP:-}" ]; then echo "kept $t"; else rm -rf "$t"; fi
}
trap cleanup EXIT

bad() { echo "FAIL $*"; fail=1; }

# expect NAME PATTERN FILE: the extended regex PATTERN matches a line of $t/FILE.
expect() {
    grep -qE -- "$2" "$t/$3" || { echo "FAIL $1: '$2' not in $3:"; cat "$t/out" "$t/err"; fail=1; }
}
# absent NAME PATTERN FILE: it matches none.
absent() {
    ! grep -qE -- "$2" "$t/$3" || { echo "FAIL $1: '$2' in $3:"; cat "$t/out" "$t/err"; fail=1; }
}

# facts CMD...: runs CMD, which prints name=value lines (tests/cli/svg_facts.py), keeping them in
# $t/facts; its status is CMD's. fact NAME: the value of NAME there.
facts() { "$@" > "$t/facts"; }
fact() { sed -n "s/^$1=//p" "$t/facts"; }

# waitfor CMD...: runs CMD every 0.05 s until it succeeds, for up to 10 s; status 1 when it never did.
waitfor() {
    local i
    for ((i = 0; i < 200; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

# listen_port LOG [PID]: the port of the "listening on http[s]://127.0.0.1:PORT" line that
# gpucap-exporter or gpucap-webhook writes to LOG (its stderr) once it listens, waiting for it up to
# 10 s, or until the server PID has exited; status 1, printing nothing, when none came.
listen_port() {
    local i port
    for ((i = 0; i < 200; i++)); do
        port=$(sed -n 's|.*listening on https\{0,1\}://127\.0\.0\.1:\([0-9]*\)[; ].*|\1|p' "$1" 2> /dev/null)
        [ -n "$port" ] && { echo "$port"; return 0; }
        [ -z "${2:-}" ] || kill -0 "$2" 2> /dev/null || return 1
        sleep 0.05
    done
    return 1
}

# preloaded LIB CMD ENV... -- ARGS...: runs `env ENV... LD_PRELOAD=LIB CMD ARGS...` (ENV: what env
# takes before the command: -i, -u NAME, NAME=VALUE); stdout to $t/out, stderr to $t/err; its status.
preloaded() {
    local lib=$1 cmd=$2 envs=()
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" LD_PRELOAD="$lib" "$cmd" "$@" > "$t/out" 2> "$t/err"
}
