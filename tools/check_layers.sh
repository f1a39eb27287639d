#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# tools/check_layers.sh SOURCE_DIR [OBJECT...]: fails (exit 1) when an include or a call runs up a
# layer of libgpucap, or when a tool includes more than the common layer.
#
# The layers, lowest first (README, "How it works"): common < core, driver < charge < hooks. A
# file may include and call its own folder and the folders below it; core and driver, side by
# side, do not use each other. Library files include project headers by path ("core/budget.h"),
# never by bare name, so every include says its layer; the public and generated headers
# (gpucap.h, gpucap_version.h) are open to every layer. The tools (tools/) may include only
# common/ headers.
# OBJECT...: the library's object files (CMake's $<TARGET_OBJECTS:...>, ;-lists allowed), each under
# <target>.dir/<layer>/: every symbol an object uses that another object defines must come from
# its own layer or one below (nm), so a call that bypasses the headers is caught too; symbol
# versions are stripped first (dlopen@GLIBC_2.2.5 is dlopen: a call to a name hooks/ interposes,
# made from below hooks/, lands on our own hook at run time); and no object uses another that uses
# it back, directly or around a circle of several.
set -euo pipefail
src=${1:?usage: check_layers.sh SOURCE_DIR [OBJECT...]}
shift
lib=$src/libgpucap
fail=0
rank() { # rank LAYER: sets r to 0 common, 1 core and driver, 2 charge, 3 hooks; empty for another folder
    case $1 in common) r=0 ;; core | driver) r=1 ;; charge) r=2 ;; hooks) r=3 ;; *) r= ;; esac
}
# may FROM TO: true when layer FROM may use layer TO.
may() {
    local from
    [ "$1" = "$2" ] && return 0
    rank "$1"; from=$r; rank "$2"
    [ "$r" -lt "$from" ]
}
bad() { echo "layers: $*"; fail=1; }

# Every source of the library lives in a layer folder.
for f in "$lib"/*.c "$lib"/*.h; do
    [ -e "$f" ] && bad "${f#"$src"/}: outside the layer folders (common, core, driver, charge, hooks)"
done

# Includes of the library's files.
for layer in common core driver charge hooks; do
    for f in "$lib/$layer"/*.c "$lib/$layer"/*.h; do
        [ -e "$f" ] || continue
        while IFS= read -r inc; do
            case $inc in
            gpucap.h | gpucap_version.h) continue ;;
            */*) to=${inc%%/*} ;;
            *) bad "${f#"$src"/}: #include \"$inc\": include the library's headers by path (\"core/budget.h\")"; continue ;;
            esac
            rank "$to"
            if [ -z "$r" ]; then
                bad "${f#"$src"/}: #include \"$inc\": not a layer"
            elif ! may "$layer" "$to"; then
                bad "${f#"$src"/}: #include \"$inc\": $layer may not use $to (an upward include)"
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done
done

# The tools see the common layer only.
while IFS= read -r f; do
    while IFS= read -r inc; do
        case $inc in
        common/*) ;;
        core/* | driver/* | charge/* | hooks/* | internal.h) bad "${f#"$src"/}: #include \"$inc\": the tools include common/ only" ;;
        esac
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find "$src/tools" -name '*.[ch]')

# Calls and data references between the objects.
objects=()
for arg in "$@"; do # CMake hands a target's objects as one ;-separated list
    IFS=';' read -ra list <<< "$arg"
    objects+=("${list[@]}")
done
if [ ${#objects[@]} -gt 0 ]; then
    syms=$(mktemp)
    edges=$(mktemp)
    trap 'rm -f "$syms" "$edges"' EXIT
    for o in "${objects[@]}"; do
        layer=$(echo "$o" | sed -n 's#.*\.dir/\(common\|core\|driver\|charge\|hooks\)/.*#\1#p')
        [ -n "$layer" ] || { bad "$o: not in a layer folder"; continue; }
        name=${o#*.dir/}
        # Symbol versions stripped: a reference to dlopen@GLIBC_2.2.5 binds to a preloaded definition
        # of dlopen all the same (ours, in hooks/), so they are one name here.
        nm "$o" | awk -v l="$layer" -v f="${name%.o}" '{ s = $NF; sub(/@.*/, "", s) }
            $1 == "U" { print "U", l, f, s }
            $2 ~ /^[TDBRCGSVW]$/ { print "D", l, f, s }'
    done > "$syms"
    out=$(awk 'BEGIN { r["common"] = 0; r["core"] = 1; r["driver"] = 1; r["charge"] = 2; r["hooks"] = 3 }
        $1 == "D" { layer[$4] = $2; file[$4] = $3; next }
        { use[NR] = $0 }
        END {
            for (i in use) {
                split(use[i], u, " ")
                s = u[4]
                if (!(s in layer) || layer[s] == u[2]) continue
                if (r[layer[s]] >= r[u[2]])
                    printf "%s uses %s of %s: %s may not use %s (an upward call)\n", u[3], s, file[s], u[2], layer[s]
            }
        }' "$syms" | sort -u)
    [ -z "$out" ] || { echo "$out" | sed 's/^/layers: /'; fail=1; }
    # No circle among the objects, in a layer or across: every use, object by object, runs one way
    # (tsort names a loop it finds; the first one is enough to fix).
    awk '$1 == "D" { file[$4] = $3; next } { use[NR] = $3 " " $4 }
        END { for (i in use) { split(use[i], u, " "); if ((u[2] in file) && file[u[2]] != u[1]) print u[1], file[u[2]] } }' \
        "$syms" | sort -u > "$edges"
    if ! loop=$(tsort "$edges" 2>&1 >/dev/null); then
        members=$(echo "$loop" | sed -n 's/^tsort: \([^ ]*\)$/\1/p' | tr '\n' ' ')
        bad "a circle among the objects: ${members% } (each uses the next, the last the first)"
        # What each one uses of the next, for the one who breaks it.
        set -- $members
        first=$1
        while [ $# -gt 0 ]; do
            from=$1 to=${2:-$first}
            what=$(awk -v a="$from" -v b="$to" '$1 == "D" && $3 == b { d[$4] = 1; next }
                $1 == "U" && $3 == a { u[$4] = 1 } END { for (s in u) if (s in d) printf "%s ", s }' "$syms")
            echo "layers:   $from uses of $to: ${what% }"
            shift
        done
    fi
fi

[ $fail = 0 ] && echo "layers: every include and call runs down"
exit $fail
