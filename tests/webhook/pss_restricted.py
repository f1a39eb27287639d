# SPDX-License-Identifier: Apache-2.0
"""pss_restricted.py: the Pod Security Standards' rules for the `restricted` level, as a function.

The published list (kubernetes.io/docs/concepts/security/pod-security-standards): the baseline
rules (host namespaces, privileged containers, added capabilities, hostPath volumes, host ports,
AppArmor, SELinux, /proc mount type, seccomp not Unconfined, unsafe sysctls) and the restricted
ones (volume types, privilege escalation, running as non-root, not as uid 0, seccomp RuntimeDefault
or Localhost, capabilities dropping ALL and adding nothing but NET_BIND_SERVICE). violations(pod)
returns one line per broken rule and container; [] for a pod the level admits.
"""

BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret", "image"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def _containers(spec):
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            yield field, c


def violations(pod):
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    psc = spec.get("securityContext") or {}
    out = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"{key}: true")
    for v in spec.get("volumes") or []:
        kinds = [k for k in v if k != "name"]
        if "hostPath" in kinds:
            out.append(f"volume {v.get('name')}: hostPath")
        if any(k not in RESTRICTED_VOLUMES for k in kinds):
            out.append(f"volume {v.get('name')}: type {kinds} not allowed")
    for s in psc.get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            out.append(f"sysctl {s.get('name')}")
    for k, v in (meta.get("annotations") or {}).items():
        if k.startswith("container.apparmor.security.beta.kubernetes.io/") and v != "runtime/default" \
                and not v.startswith("localhost/"):
            out.append(f"annotation {k}: {v}")
    pod_nonroot = psc.get("runAsNonRoot") is True
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if psc.get("runAsUser") == 0:
        out.append("pod runAsUser: 0")
    if pod_seccomp == "Unconfined":
        out.append("pod seccompProfile Unconfined")
    if (psc.get("seLinuxOptions") or {}).get("type") not in SELINUX_TYPES:
        out.append("pod seLinuxOptions.type")
    if (psc.get("appArmorProfile") or {}).get("type") == "Unconfined":
        out.append("pod appArmorProfile Unconfined")
    for field, c in _containers(spec):
        name = f"{field}/{c.get('name')}"
        sc = c.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        added = set(caps.get("add") or [])
        if added - BASELINE_CAPS:
            out.append(f"{name}: adds capabilities {sorted(added - BASELINE_CAPS)}")
        if added - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities other than NET_BIND_SERVICE")
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities.drop lacks ALL")
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.append(f"{name}: hostPort {p['hostPort']}")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"{name}: procMount {sc['procMount']}")
        if (sc.get("seLinuxOptions") or {}).get("type") not in SELINUX_TYPES:
            out.append(f"{name}: seLinuxOptions.type")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            out.append(f"{name}: appArmorProfile Unconfined")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation is not false")
        nonroot = sc.get("runAsNonRoot")
        if nonroot is False or (nonroot is None and not pod_nonroot):
            out.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile is {seccomp}, not RuntimeDefault or Localhost")
    return out
