# SPDX-License-Identifier: Apache-2.0
"""harness.py: starts gpucap-webhook on loopback for the hostile-client tests, reads its memory, and
gives their verdict once it is stopped.

Imported by hostile_bodies.py and conn_flood.py. A throwaway CA signs a certificate for 127.0.0.1;
the server listens on a free port with the thread count of the example Deployment.
"""
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import yaml


class Webhook:
    def __init__(self, binary, threads=4, key="ec", extra=()):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        keyopt = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if key == "ec" else ["-newkey", "rsa:2048"]
        subprocess.run(["openssl", "req", "-x509", *keyopt, "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", f"{d}/tls.key", "-out", f"{d}/tls.crt"],
                       check=True, capture_output=True)
        self.log_path = f"{d}/log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--cert", f"{d}/tls.crt", "--key",
                                      f"{d}/tls.key", "--image", "gpucap:test", "--default-memory", "25%", "--threads", str(threads), *extra],
                                     stderr=self.log)
        self.port = None
        for _ in range(100):
            m = re.search(r"listening on https://127\.0\.0\.1:(\d+) ", self.read_log())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if not self.port:
            self.stop()
            raise RuntimeError("the webhook did not start:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def status(self, field):
        """A field of /proc/PID/status in bytes (VmRSS, VmHWM), or a count (Threads)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == field:
                    parts = value.split()
                    return int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
        raise KeyError(field)

    def open_fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(f"{self.dir.name}/tls.crt")
        return ctx

    def tls_socket(self, timeout=10, source=None):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout,
                                       source_address=(source, 0) if source else None)
        return self.context().wrap_socket(raw, server_hostname="127.0.0.1")

    def healthz(self, timeout=5, source=None):
        """Seconds /healthz took to answer "ok"; raises on anything else."""
        t0 = time.monotonic()
        s = self.tls_socket(timeout, source)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = read_to_end(s)
        finally:
            s.close()
        if not data.startswith(b"HTTP/1.1 200") or not data.endswith(b"ok\n"):
            raise RuntimeError(f"/healthz answered {data[:200]!r}")
        return time.monotonic() - t0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        rc = self.proc.returncode
        self.dir.cleanup()
        return rc

    def finish(self, failures, tail):
        """Stops the server; the test's exit status: 1 after printing the failures (with an exit
        status after SIGTERM other than 0 among them) and the last `tail` lines of the server's log,
        else 0 after "ok"."""
        log = self.read_log()
        rc = self.stop()
        if rc != 0:
            failures.append(f"exit status {rc} after SIGTERM")
        for f in failures:
            print("FAIL", f)
        if failures:
            print(f"--- server log (last {tail} lines)")
            print("\n".join(log.splitlines()[-tail:]))
            return 1
        print("ok")
        return 0


def read_to_end(s):
    """Everything a socket sends until the server closes it."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def start(argv):
    """For a test run as `TEST PATH/TO/gpucap-webhook EXAMPLES_DIR [--sanitized]`: the webhook started,
    the memory limit of its Deployment, and whether the build is a sanitizer's."""
    limit = manifest_memory_limit(argv[2])
    return Webhook(argv[1]), limit, argv[3:] == ["--sanitized"]


def manifest_memory_limit(examples_dir):
    """limits.memory of the webhook container in webhook.yaml, in bytes."""
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 1000, "M": 1000 ** 2, "G": 1000 ** 3}
    with open(os.path.join(examples_dir, "webhook.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "Deployment":
                text = str(doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"])
                m = re.fullmatch(r"(\d+)([KMG]i?)?", text)
                return int(m.group(1)) * units.get(m.group(2), 1)
    raise RuntimeError("no Deployment with a memory limit in webhook.yaml")
