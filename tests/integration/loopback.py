"""Real servers on loopback for the workflow providers' tests: an HTTP(S) server that records requests and answers
per path (TLS from velashard.webhook.certificates, optionally requiring a client certificate), a Prometheus-like
query API on it, and an SMTP server (aiosmtpd) that keeps the messages it receives."""

from __future__ import annotations

import datetime
import json
import os
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from aiosmtpd.controller import Controller
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from velashard.webhook.certificates import KeyPair, make_ca, make_serving_cert

Answer = Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_cert: dict[str, Any] | None = None


def json_answer(status: int, value: Any) -> Answer:
    body = json.dumps(value).encode()
    return lambda _request: (status, {"Content-Type": "application/json"}, body)


def make_client_cert(ca: KeyPair, name: str) -> KeyPair:
    """A client certificate (clientAuth) signed by `ca`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM),
                   key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()))


class HTTPServer:
    """Answers each path with `answers[path]` (default: 200 `{"ok": true}`), records every request."""

    def __init__(self, tls: bool = False, client_ca: KeyPair | None = None):
        self.requests: list[Request] = []
        self.answers: dict[str, Answer] = {}
        self.ca = make_ca("loopback-test-ca") if tls else None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
                request = Request(self.command, self.path, dict(self.headers), body, peer or None)
                outer.requests.append(request)
                answer = outer.answers.get(self.path.split("?")[0], json_answer(200, {"ok": True}))
                status, headers, content = answer({"path": self.path, "body": body, "method": self.command})
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(content))}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        if self.ca is not None:
            serving = make_serving_cert(self.ca, ["127.0.0.1", "localhost"])
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            with tempfile.TemporaryDirectory() as tmp:
                cert, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
                with open(cert, "wb") as fh:
                    fh.write(serving.cert_pem)
                with open(key, "wb") as fh:
                    fh.write(serving.key_pem)
                context.load_cert_chain(cert, key)
            if client_ca is not None:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(cadata=client_ca.cert_pem.decode())
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f'{"https" if self.ca else "http"}://127.0.0.1:{self.port}{path}'

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def prometheus(values: list[float]) -> Answer:
    """Prometheus' /api/v1/query: one vector sample, the next of `values` each time (the last one repeats)."""
    calls = {"n": 0}

    def answer(_request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        value = values[min(calls["n"], len(values) - 1)]
        calls["n"] += 1
        body = {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"job": "web"}, "value": [1700000000.0, str(value)]}]}}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()
    return answer


@dataclass
class Mailbox:
    messages: list[dict[str, Any]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos),
                              "content": envelope.content.decode("utf-8", "replace")})
        return "250 Message accepted for delivery"


class SMTPServer:
    """aiosmtpd on loopback; `mailbox.messages` holds what it received."""

    def __init__(self) -> None:
        self.mailbox = Mailbox()
        # aiosmtpd checks its port by connecting to it, so it needs a number, not 0: a free one, found first
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()
