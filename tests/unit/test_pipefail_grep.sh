#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_pipefail_grep.sh SOURCE_DIR: no script that sets pipefail pipes a command into `grep -q`.
# grep -q exits at its first match; a command still writing then dies of SIGPIPE and, under
# pipefail, the pipeline fails although the check held (CI refused a stop this way: the exporter's
# 5 KB scrape matched inside its first 4 KB write). Capture the output first, then grep it.
# A planted script is checked too, so the scan itself is seen to catch the pattern.
cd "$1" || exit 1
git rev-parse --git-dir > /dev/null 2>&1 || { echo "not a git checkout; skipping"; exit 77; }
# Lines (not comments) of FILE where a pipe feeds grep -q / --quiet / --silent.
offending() {
    grep -nE '\|[[:space:]]*grep[[:space:]]+(-[[:alnum:]]*q|--quiet|--silent)' "$1" | grep -vE '^[0-9]+:[[:space:]]*#'
}
found=0
while read -r f; do
    case "$f" in tests/unit/test_pipefail_grep.sh) continue ;; *.sh|.ci/run) ;; *) continue ;; esac
    [ -f "$f" ] && grep -q 'pipefail' "$f" || continue
    if lines=$(offending "$f"); then
        echo "$f: a pipe into grep -q under pipefail:"
        echo "$lines"
        found=$((found + 1))
    fi
done < <(git ls-files)
planted=$(mktemp)
trap 'rm -f "$planted"' EXIT
printf '#!/bin/bash\nset -o pipefail\nseq 100000 | grep -q 5 || exit 1\n' > "$planted"
offending "$planted" > /dev/null || { echo "FAIL: the scan missed a planted 'seq | grep -q'"; exit 1; }
[ "$found" = 0 ] || { echo "FAIL: $found scripts"; exit 1; }
echo "ok: no pipe into grep -q under pipefail"
