#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_layers_planted.sh SOURCE_DIR: tools/check_layers.sh passes on a copy of the tree, and fails
# on each planted breach: an upward include in the library, a call up a layer that no include
# shows (two objects), the same call made through a versioned reference (dlopen@GLIBC_2.2.5 from
# below hooks/, which binds to the dlopen hooks/ defines), two objects of one layer that use each
# other (a circle), a bare include, a tool including a layer above common.
set -u
src=${1:?usage: test_layers_planted.sh SOURCE_DIR}
check=$src/tools/check_layers.sh
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
copy() { # a fresh copy of the library's and the tools' sources in $t/tree
    rm -rf "$t/tree" && mkdir -p "$t/tree"
    cp -r "$src/libgpucap" "$src/tools" "$t/tree/"
}
expect() { # expect WHAT PATTERN [OBJECT...]: the check fails and says PATTERN
    local what=$1 pattern=$2 out rc
    shift 2
    out=$(bash "$check" "$t/tree" "$@" 2>&1) && rc=0 || rc=$?
    if [ $rc = 0 ] || ! grep -q "$pattern" <<< "$out"; then
        echo "FAIL: $what: the check did not fail as it should (exit $rc):"; echo "$out"; fail=1
    fi
}

copy
out=$(bash "$check" "$t/tree" 2>&1) || { echo "FAIL: the tree as it is fails:"; echo "$out"; fail=1; }

copy
sed -i '0,/#include "common\/log.h"/s//#include "common\/log.h"\n#include "hooks\/init.h"/' "$t/tree/libgpucap/common/log.c"
expect "common/log.c including hooks/init.h" 'common/log.c: #include "hooks/init.h": common may not use hooks'

copy
sed -i '0,/#include "core\/budget.h"/s//#include "core\/budget.h"\n#include "driver\/resolve.h"/' "$t/tree/libgpucap/core/budget.c"
expect "core/budget.c including driver/resolve.h" 'core may not use driver'

copy
echo '#include "budget.h"' >> "$t/tree/libgpucap/charge/charge.c"
expect "a bare include" 'include the library.s headers by path'

copy
sed -i '0,/#include "common\/defs.h"/s//#include "common\/defs.h"\n#include "core\/budget.h"/' "$t/tree/tools/gpucap/cli.h"
expect "tools/gpucap/cli.h including core/budget.h" 'the tools include common/ only'

# A call up a layer with no include to show it: a common object using a hooks function.
copy
cc=${CC:-cc}
if command -v "$cc" > /dev/null; then
    mkdir -p "$t/o/x.dir/common" "$t/o/x.dir/hooks"
    printf 'void gpc_planted_hook(void);\nvoid gpc_planted_user(void) { gpc_planted_hook(); }\n' > "$t/user.c"
    printf 'void gpc_planted_hook(void) {}\n' > "$t/hook.c"
    "$cc" -c "$t/user.c" -o "$t/o/x.dir/common/user.c.o" && "$cc" -c "$t/hook.c" -o "$t/o/x.dir/hooks/hook.c.o"
    expect "a common object calling a hooks function" 'uses gpc_planted_hook of hooks/hook.c: common may not use hooks' \
        "$t/o/x.dir/common/user.c.o" "$t/o/x.dir/hooks/hook.c.o"

    # An interposed name called from below hooks/ by its versioned name: the version is no escape.
    mkdir -p "$t/o/y.dir/driver" "$t/o/y.dir/hooks"
    printf '__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");\nvoid *dlopen(const char *, int);\n%s\n' \
        'void *gpc_planted_open(void) { return dlopen("libcuda.so.1", 1); }' > "$t/open.c"
    printf 'void *dlopen(const char *f, int m) { (void)f, (void)m; return 0; }\n' > "$t/dlopen.c"
    "$cc" -c "$t/open.c" -o "$t/o/y.dir/driver/open.c.o" && "$cc" -c "$t/dlopen.c" -o "$t/o/y.dir/hooks/dlsym.c.o"
    if nm "$t/o/y.dir/driver/open.c.o" | grep -F -e 'dlopen@' > /dev/null; then
        expect "a driver object calling dlopen@GLIBC_2.2.5 where hooks/ defines dlopen" \
            'uses dlopen of hooks/dlsym.c: driver may not use hooks' "$t/o/y.dir/driver/open.c.o" "$t/o/y.dir/hooks/dlsym.c.o"
    else
        echo "FAIL: the planted object holds no versioned reference (nm):"; nm "$t/o/y.dir/driver/open.c.o"; fail=1
    fi

    # Two objects of one layer that use each other: no layer is crossed, and still a circle.
    mkdir -p "$t/o/z.dir/core"
    printf 'void gpc_planted_b(void);\nvoid gpc_planted_a(void) { gpc_planted_b(); }\n' > "$t/a.c"
    printf 'void gpc_planted_a(void);\nvoid gpc_planted_b(void) { gpc_planted_a(); }\n' > "$t/b.c"
    "$cc" -c "$t/a.c" -o "$t/o/z.dir/core/a.c.o" && "$cc" -c "$t/b.c" -o "$t/o/z.dir/core/b.c.o"
    expect "two core objects calling each other" 'a circle among the objects: core/a.c core/b.c' \
        "$t/o/z.dir/core/a.c.o" "$t/o/z.dir/core/b.c.o"
fi
[ $fail = 0 ] && echo "layers: every planted breach is caught"
exit $fail
