#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_exports.sh LIB SRCDIR: the library exports exactly the names of its version script, and the
# version script lists exactly the hooks of hooklist.h (GPC_HOOKS, GPC_NVML_HOOKS) plus dlsym, dlvsym, the
# exec family (libgpucap/hooks/exec.c) and the public API.
set -u
lib=$1 src=$2
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u > "$t/exported"
sed -n '/global:/,/local:/p' "$src/libgpucap.map" | grep -oE '^[[:space:]]+[A-Za-z_][A-Za-z0-9_]*;' |
    tr -d ' ;\t' | sort -u > "$t/map"
{ sed -n '/define GPC_HOOKS/,/^$/p' "$src/common/hooklist.h" | grep -oE 'X\((cu[A-Za-z0-9_]+)' | sed 's/X(//';
  sed -n '/define GPC_NVML_HOOKS/,/^$/p' "$src/common/hooklist.h" | grep -oE 'X\((nvml[A-Za-z0-9_]+)' | sed 's/X(//';
  printf 'dlsym\ndlvsym\ndlopen\ndlmopen\n'; printf '%s\n' execve execv execvp execvpe execl execle execlp fexecve execveat; grep -oE '^[a-z_ ]*\*?(gpucap_[a-z_]+)\(' "$src/include/gpucap.h" |
  grep -oE 'gpucap_[a-z_]+'; } | sort -u > "$t/expected"
[ -s "$t/exported" ] || { echo "FAIL: $lib exports nothing"; exit 1; }
ok=0
if ! diff -u "$t/map" "$t/exported"; then echo "FAIL: nm -D differs from libgpucap.map"; ok=1; fi
if ! diff -u "$t/expected" "$t/map"; then echo "FAIL: libgpucap.map differs from hooklist.h + API"; ok=1; fi
[ $ok = 0 ] && echo "exports: $(wc -l < "$t/exported") names match the map and the hook list"
exit $ok
