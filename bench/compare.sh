# SPDX-License-Identifier: Apache-2.0
# compare.sh: what bench/run.sh and bench/graph.sh share, sourced with the BUILD directory as $1:
# the fake driver's environment, the library ($lib), a shared ledger's path ($ledger, removed at
# exit), and one table row per load comparing the same benchmark without gpucap, with a private
# budget (GPUCAP_LEDGER=off) and with the shared ledger (the default).
build=${1:-build}
lib=$build/lib/libgpucap.so
export LD_LIBRARY_PATH=$build/fake FAKECUDA_MEM=64GiB GPUCAP_CONFIG=/dev/null
ledger=$(mktemp -u /tmp/gpucap-bench-XXXXXX.ledger)
trap 'rm -f "$ledger"' EXIT

# med: the median_ns=N a benchmark program prints, alone.
med() { sed -n 's/.*median_ns=\([0-9.]*\).*/\1/p'; }

# header LABEL: the table's head, LABEL (as wide as the rows' labels) over the first column.
header() {
    printf '%s %12s %12s %12s %14s %14s\n' "$1" "none (ns)" "private (ns)" "ledger (ns)" "private added" "ledger added"
}

# compare LABEL CMD...: one row: LABEL, then the ns that `CMD ENV...` prints run with each of the
# three settings as ENV (arguments of env(1)), and what the private budget and the ledger add.
compare() {
    local label=$1 none priv shared
    shift
    none=$("$@" -u LD_PRELOAD)
    priv=$("$@" GPUCAP_MEMORY_LIMIT=32GiB GPUCAP_LEDGER=off LD_PRELOAD="$lib")
    shared=$("$@" GPUCAP_MEMORY_LIMIT=32GiB GPUCAP_LEDGER="$ledger" LD_PRELOAD="$lib")
    printf '%s %12s %12s %12s %14.1f %14.1f\n' "$label" "$none" "$priv" "$shared" \
        "$(awk -v a="$priv" -v b="$none" 'BEGIN{print a-b}')" "$(awk -v a="$shared" -v b="$none" 'BEGIN{print a-b}')"
}
