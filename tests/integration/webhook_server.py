"""A real HTTPS admission webhook for tests: stdlib server, certificates from velashard.webhook.certificates."""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from velashard.webhook.certificates import KeyPair, make_ca, make_serving_cert

Decide = Callable[[dict[str, Any]], dict[str, Any]]


def allow(request: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True}


def patch_response(ops: list[dict[str, Any]]) -> dict[str, Any]:
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


class WebhookServer:
    """Answers AdmissionReviews per path with a `decide(request) -> response fields` function."""

    def __init__(self, hosts: list[str] | None = None):
        self.ca = make_ca()
        self.serving: KeyPair = make_serving_cert(self.ca, hosts or ["127.0.0.1", "localhost"])
        self.handlers: dict[str, Decide] = {}
        self.reviews: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.reviews.append(review)
                decide = outer.handlers.get(self.path, allow)
                response = {"uid": review["request"]["uid"], **decide(review["request"])}
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            with open(cert, "wb") as fh:
                fh.write(self.serving.cert_pem)
            with open(key, "wb") as fh:
                fh.write(self.serving.key_pem)
            context.load_cert_chain(cert, key)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
