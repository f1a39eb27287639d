# SPDX-License-Identifier: Apache-2.0
"""json_server.py: what the fake Kubernetes API servers of the tests share (tests/agent/ and
tests/webhook/fake_apiserver.py): a request handler that answers JSON objects and logs nothing, and
serving it on a free port of 127.0.0.1 whose number the tests read from a file.
"""
import json
import os
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    def answer(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(handler, port_file, cert=None, key=None):
    """Serves `handler` (over TLS with cert and key) until killed, once the port is in port_file,
    written whole: a test that polls for the file never reads half of it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()
