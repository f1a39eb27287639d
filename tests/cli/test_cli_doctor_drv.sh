#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# test_cli_doctor_drv.sh GPUCAP: `gpucap doctor` on the driver's own per-container limits, with a
# fake node tree (--root): the driver's branch from /proc/driver/nvidia/version, cgroup v2 and its
# dmem controller, dmem.max of this container's cgroup, the toolkit's variables, and the driver's
# own answer (the fake driver's FAKECUDA_DRIVER_LIMIT) against the card.
set -u
gpucap=$1
. "$(dirname "$0")/../common.sh"
want() { grep -qE -- "$1" "$t/out" || bad "'$1' not in: $(cat "$t/out")"; }
wont() { grep -qE -- "$1" "$t/out" && bad "'$1' in: $(cat "$t/out")"; }
doc() { env -u NVIDIA_GPU_MEMORY_LIMIT -u NVIDIA_GPU_MEMORY_REQUEST "$@" "$gpucap" doctor --root "$root" > "$t/out" 2>&1; }

# A new node: driver r615, cgroup v2 with dmem, a container whose cgroup holds 4 GiB of the card.
root=$t/new
mkdir -p "$root/proc/driver/nvidia" "$root/proc/self" "$root/sys/fs/cgroup/kubepods/pod1/ctr" "$root/usr/bin"
echo "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  615.12  Release Build  (dvs-builder@x)" \
    > "$root/proc/driver/nvidia/version"
echo "cpuset cpu io memory hugetlb pids rdma misc dmem" > "$root/sys/fs/cgroup/cgroup.controllers"
echo "0::/kubepods/pod1/ctr" > "$root/proc/self/cgroup"
printf 'nvidia/0000:3b:00.0/vidmem 4294967296\n' > "$root/sys/fs/cgroup/kubepods/pod1/ctr/dmem.max"
printf 'nvidia/0000:3b:00.0/vidmem 1073741824\n' > "$root/sys/fs/cgroup/kubepods/pod1/ctr/dmem.current"
printf 'nvidia/0000:3b:00.0/vidmem 150754820096\n' > "$root/sys/fs/cgroup/dmem.capacity"
printf '#!/bin/sh\n' > "$root/usr/bin/nvidia-cdi-hook" && chmod +x "$root/usr/bin/nvidia-cdi-hook"
doc NVIDIA_GPU_MEMORY_LIMIT=4096 NVIDIA_GPU_MEMORY_REQUEST=2048
want "^PASS  driver limits: driver 615.12 \(r615\) can enforce per-container memory limits"
want "^PASS  cgroup: v2, controllers: cpuset .* dmem$"
want "^PASS  cgroup: the dmem controller is enabled"
want "^INFO  toolkit: NVIDIA_GPU_MEMORY_LIMIT=4096 and NVIDIA_GPU_MEMORY_REQUEST=2048 declared .*\(4.00 GiB\)"
want "^INFO  toolkit: .*/usr/bin/nvidia-cdi-hook is present"
want "^PASS  driver limit: in force in this cgroup \(/kubepods/pod1/ctr\): dmem.max nvidia/0000:3b:00.0/vidmem = 4.00 GiB, in use 1.00 GiB"
wont "not in force"

# The same node, and the driver's own answer: the fake driver limits this container to 256 MiB.
doc FAKECUDA_DRIVER_LIMIT=256MiB
want "^PASS  driver limit: in force on device 0: the driver reports 256.00 MiB of the card's 1.00 GiB"

# A dmem.max of "max" is no limit; declared variables that the driver does not show are a warning.
printf 'nvidia/0000:3b:00.0/vidmem max\n' > "$root/sys/fs/cgroup/kubepods/pod1/ctr/dmem.max"
doc NVIDIA_GPU_MEMORY_LIMIT=4096 NVIDIA_GPU_MEMORY_REQUEST=2048
want "^WARN  driver limit: declared \(4.00 GiB\) but not in force"
wont "^PASS  driver limit:"
# No limit of gpucap's own: the declared one is its budget (the library enforces it).
doc -u GPUCAP_MEMORY_LIMIT NVIDIA_GPU_MEMORY_LIMIT=4096 NVIDIA_GPU_MEMORY_REQUEST=2048
want "^PASS  limit: no limit of gpucap's own; the one declared for the driver \(NVIDIA_GPU_MEMORY_LIMIT\) is gpucap's budget"
doc -u GPUCAP_MEMORY_LIMIT
want "^FAIL  limit: no memory limit is set"
# Only one of the two variables: the hook applies none.
doc NVIDIA_GPU_MEMORY_LIMIT=4096
want "^WARN  toolkit: only one of NVIDIA_GPU_MEMORY_REQUEST and NVIDIA_GPU_MEMORY_LIMIT is set"
doc NVIDIA_GPU_MEMORY_LIMIT=4GiB NVIDIA_GPU_MEMORY_REQUEST=1
want "^WARN  toolkit: not whole numbers of MiB"

# An older node: driver 580, cgroup v2 without dmem; no variables.
root=$t/old
mkdir -p "$root/proc/driver/nvidia" "$root/sys/fs/cgroup"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:55:41 UTC 2025" \
    > "$root/proc/driver/nvidia/version"
echo "cpuset cpu io memory pids" > "$root/sys/fs/cgroup/cgroup.controllers"
doc
want "^INFO  driver limits: driver 580.95.05 is older than r615"
want "^INFO  cgroup: no dmem controller here"
want "^INFO  toolkit: NVIDIA_GPU_MEMORY_LIMIT and NVIDIA_GPU_MEMORY_REQUEST are not set here"
want "^INFO  driver limit: none in force here; gpucap alone enforces"

# cgroup v1 (no cgroup.controllers).
rm "$root/sys/fs/cgroup/cgroup.controllers"
doc
want "^INFO  driver limits: no cgroup v2 here"
exit $fail
