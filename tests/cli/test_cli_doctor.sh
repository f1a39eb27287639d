#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_doctor.sh GPUCAP PROBE_LIB: `gpucap doctor` on a machine without a GPU (the fake driver):
# it runs, says the driver is a fake, fails the device-node check, passes the export check of the
# built library and fails it for a library that lacks the hooks; preload and limit checks.
set -u
gpucap=$1 other=$2
. "$(dirname "$0")/../common.sh"
want() { grep -qE -- "$1" "$t/out" || bad "'$1' not in: $(cat "$t/out" "$t/err")"; }

env -u GPUCAP_MEMORY_LIMIT "$gpucap" doctor > "$t/out" 2> "$t/err"; rc=$?
[ $rc = 1 ] || bad "doctor without a GPU: rc $rc, want 1"
if ! ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
    want "^FAIL  device nodes: no /dev/nvidia"
fi
want "^PASS  driver: libcuda.so.1 loaded, CUDA 13.0, 1 device"
want "^INFO  driver: this libcuda.so.1 is gpucap's FAKE driver"
want "^PASS  NVML: driver 580.00.fake"
want "^INFO  card 0: .* GPU-[0-9a-f-]+, 1.00 GiB memory, MIG not supported"
want "^FAIL  limit: no memory limit is set"
want "^PASS  library: .*libgpucap.so exports all [0-9]+ hooks"
FAKECUDA_MIG=1 "$gpucap" doctor > "$t/out" 2> "$t/err"
want "MIG enabled"
LD_PRELOAD=$TEST_PRELOAD GPUCAP_MEMORY_LIMIT=1GiB "$gpucap" doctor > "$t/out" 2> "$t/err"
want "^PASS  preload: libgpucap is preloaded"
want "^PASS  limit: a memory limit is set"
# Under the library NVML answers the budget: the card's size is the ledger's, and the budget is named.
led=$t/doctor.ledger
FAKECUDA_MEM=16GiB GPUCAP_MEMORY_LIMIT=4GiB GPUCAP_LEDGER=$led LD_PRELOAD=$TEST_PRELOAD "$gpucap" doctor > "$t/out" 2> "$t/err"
want "^INFO  card 0: .* 16.00 GiB memory \\(the ledger's figure; gpucap answers this process its budget, 4.00 GiB\\)"
rm -f "$led"
# No ledger readable (a private budget): the figure is said to be the budget, not the card's size.
FAKECUDA_MEM=16GiB GPUCAP_MEMORY_LIMIT=4GiB GPUCAP_LEDGER=off LD_PRELOAD=$TEST_PRELOAD "$gpucap" doctor > "$t/out" 2> "$t/err"
want "^INFO  card 0: .* 4.00 GiB memory as gpucap answers this process \\(its budget"
"$gpucap" doctor > "$t/out" 2> "$t/err"
want "^FAIL  preload: libgpucap is not in LD_PRELOAD"
"$gpucap" doctor --lib "$other" > "$t/out" 2> "$t/err"
want "^FAIL  library: .* does not export [0-9]+ hooks: cuMemAlloc, "
LD_LIBRARY_PATH=/nonexistent "$gpucap" doctor > "$t/out" 2> "$t/err"
want "^FAIL  driver: libcuda.so.1 cannot be loaded"
want "^FAIL  NVML: libnvidia-ml.so.1 cannot be loaded"
exit $fail
