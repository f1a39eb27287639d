#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_images.sh: the images build without a Docker daemon and without short names. Every base of
# examples/kubernetes/Dockerfile is named in full (registry/repository:tag; buildah and podman
# refuse a short name no alias resolves) or is scratch or an earlier stage; the webhook's and the
# exporter's stages come from no CUDA image; examples/kubernetes/build-images.sh builds the three
# images (and the installer when asked) with podman, buildah or docker, tagged from settings.env,
# pushes with --push, and refuses a tool it does not know.
set -u
. "$(dirname "$0")/../common.sh"
src=${TEST_SOURCE:?}
df=$src/examples/kubernetes/Dockerfile
script=$src/examples/kubernetes/build-images.sh

# The bases: FROM <ref> [AS <name>].
declare -A stage_from
while read -r _ ref _ name; do
    if [ "$ref" != scratch ] && [ -z "${stage_from[$ref]+x}" ]; then
        first=${ref%%/*}
        case $ref in
        */*) case $first in *.* | *:* | localhost) ;; *) bad "FROM $ref: a short name (no registry)" ;; esac ;;
        *) bad "FROM $ref: a short name (no registry, no repository path)" ;;
        esac
        case $ref in *:* | *@sha256:*) ;; *) bad "FROM $ref: no tag or digest" ;; esac
    fi
    [ -n "$name" ] && stage_from[$name]=$ref
done < <(grep -iE '^FROM ' "$df" | sed -E 's/ +[Aa][Ss] +/ AS /')
# What a stage finally comes from, through earlier stages.
origin() { local s=$1; while [ -n "${stage_from[$s]+x}" ]; do s=${stage_from[$s]}; done; echo "$s"; }
for s in webhook-build webhook exporter-build exporter; do
    [ -n "${stage_from[$s]+x}" ] || { bad "no stage $s in the Dockerfile"; continue; }
    case $(origin "$s") in *cuda*) bad "stage $s comes from a CUDA image ($(origin "$s")): the servers need no CUDA" ;; esac
done
grep -q 'GPUCAP_LIBRARY=OFF' "$df" || bad "the servers' build stage does not configure without the library (-DGPUCAP_LIBRARY=OFF)"

# The script: a stub tool on PATH records what it is asked.
mkdir -p "$t/bin"
for tool in podman buildah docker; do
    printf '#!/bin/sh\necho "%s $*" >> "%s/calls"\n' "$tool" "$t" > "$t/bin/$tool"
    chmod +x "$t/bin/$tool"
done
printf 'REGISTRY=reg.example/team\nVERSION=9.9.9 # a comment\n' > "$t/settings.env"
PATH=$t/bin:$PATH "$script" --settings "$t/settings.env" --push > "$t/out" 2>&1 || bad "script: $(cat "$t/out")"
for pair in library:gpucap webhook:gpucap-webhook exporter:gpucap-exporter; do
    grep -qx "podman build -f examples/kubernetes/Dockerfile --target ${pair%%:*} -t reg.example/team/${pair#*:}:9.9.9 ." "$t/calls" ||
        bad "podman was not asked to build ${pair#*:}: $(cat "$t/calls")"
    grep -qx "podman push reg.example/team/${pair#*:}:9.9.9" "$t/calls" || bad "not pushed: ${pair#*:}"
done
[ "$(grep -c ' build ' "$t/calls")" = 3 ] || bad "three images, not: $(cat "$t/calls")"
rm -f "$t/calls"
PATH=$t/bin:$PATH "$script" --tool buildah --registry r.example --version 1 --installer > "$t/out" 2>&1 || bad "buildah: $(cat "$t/out")"
grep -qx "buildah bud -f examples/kubernetes/Dockerfile --target installer -t r.example/gpucap-installer:1 ." "$t/calls" ||
    bad "buildah bud, with the installer: $(cat "$t/calls")"
grep -q push "$t/calls" && bad "pushed without --push"
rm -f "$t/calls"
PATH=$t/bin:$PATH "$script" --tool docker --registry r --version 1 --dry-run > "$t/out" 2>&1 || bad "dry run: $(cat "$t/out")"
[ ! -e "$t/calls" ] || bad "a dry run ran: $(cat "$t/calls")"
grep -q '^+ docker build ' "$t/out" || bad "a dry run prints nothing: $(cat "$t/out")"
"$script" --tool kaniko --registry r --version 1 > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || bad "an unknown tool: rc $rc, want 2"
printf '#!/bin/sh\nexit 3\n' > "$t/bin/podman"
PATH=$t/bin:$PATH "$script" --registry r --version 1 > "$t/out" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "building r/gpucap:1 (library) with podman failed" "$t/out" || bad "a failed build: rc $rc $(cat "$t/out")"
[ $fail = 0 ] && echo "ok: full names, servers without CUDA, one script for podman, buildah and docker"
exit $fail
