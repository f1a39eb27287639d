#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# examples/kubernetes/build-images.sh [OPTION...]: builds the three images of the cluster quick start
# from the repository root's Dockerfile (examples/kubernetes/Dockerfile), with podman, buildah or
# docker, whichever is found first (podman and buildah need no daemon, and run rootless where the
# user has subordinate ids), tagged REGISTRY/gpucap, REGISTRY/gpucap-webhook and
# REGISTRY/gpucap-exporter at VERSION; with --push, pushed there.
#   --registry R   the registry and path (default: REGISTRY in SETTINGS)
#   --version V    the tag (default: VERSION in SETTINGS)
#   --settings F   the overlay's settings.env to read them from
#                  (default: examples/overlays/webhook-exporter/settings.env)
#   --tool T       podman, buildah or docker (default: the first one found)
#   --installer    also the optional installer image (REGISTRY/gpucap-installer)
#   --push         push each image after it is built
#   --dry-run      print the commands, run none
# Exit 0 when every image was built (and pushed), 1 on a failure, 2 for a usage error.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
settings=$root/examples/overlays/webhook-exporter/settings.env
registry= version= tool= push=0 dry=0 installer=0
usage() { echo "usage: build-images.sh [--registry R] [--version V] [--settings F] [--tool podman|buildah|docker] [--installer] [--push] [--dry-run]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --registry) [ $# -ge 2 ] || usage; registry=$2; shift 2 ;;
    --version) [ $# -ge 2 ] || usage; version=$2; shift 2 ;;
    --settings) [ $# -ge 2 ] || usage; settings=$2; shift 2 ;;
    --tool) [ $# -ge 2 ] || usage; tool=$2; shift 2 ;;
    --installer) installer=1; shift ;;
    --push) push=1; shift ;;
    --dry-run) dry=1; shift ;;
    -h | --help) sed -n '3,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "build-images.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
# A value of settings.env: KEY=VALUE lines, read as text (the file is never sourced).
setting() { [ -f "$settings" ] && sed -n "s/^$1=\\([^ #]*\\).*/\\1/p" "$settings" | tail -1; }
[ -n "$registry" ] || registry=$(setting REGISTRY)
[ -n "$version" ] || version=$(setting VERSION)
[ -n "$registry" ] && [ -n "$version" ] || { echo "build-images.sh: no REGISTRY or VERSION (give --registry and --version, or set them in $settings)" >&2; exit 2; }
if [ -z "$tool" ]; then
    for t in podman buildah docker; do
        command -v "$t" > /dev/null 2>&1 && { tool=$t; break; }
    done
fi
case $tool in
podman | docker) build="$tool build" ;;
buildah) build="buildah bud" ;;
"") echo "build-images.sh: none of podman, buildah, docker is installed (Debian: apt install podman)" >&2; exit 1 ;;
*) echo "build-images.sh: --tool takes podman, buildah or docker, not '$tool'" >&2; exit 2 ;;
esac
run() {
    echo "+ $*"
    [ $dry = 1 ] || "$@"
}
targets="library:gpucap webhook:gpucap-webhook exporter:gpucap-exporter"
[ $installer = 1 ] && targets="$targets installer:gpucap-installer"
cd "$root"
for pair in $targets; do
    target=${pair%%:*} image=$registry/${pair#*:}:$version
    # shellcheck disable=SC2086 # $build is the tool and its verb
    run $build -f examples/kubernetes/Dockerfile --target "$target" -t "$image" . ||
        { echo "build-images.sh: building $image ($target) with $tool failed" >&2; exit 1; }
    if [ $push = 1 ]; then
        run "$tool" push "$image" || { echo "build-images.sh: pushing $image failed" >&2; exit 1; }
    fi
done
echo "build-images.sh: built$([ $push = 1 ] && echo " and pushed") $(echo "$targets" | wc -w) images with $tool: $registry/...:$version"
