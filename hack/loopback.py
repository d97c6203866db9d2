"""Real HTTP and SMTP servers on the loopback interface that record what they receive, for workflow steps that
talk to the outside (notification, webhook, request) in tests and in hack/kubevela_workflow_examples.py.

    with HTTPRecorder() as http, SMTPRecorder() as smtp:
        url = http.url("/hook")                 # http://127.0.0.1:<port>/hook
        ...                                     # something POSTs to it, sends a mail to smtp.port
        http.requests[0].body, smtp.messages[0].recipients

An HTTPRecorder answers 200 with `{"ok": true}` unless given a `respond(method, path, body)` that returns
(status, JSON-able body). The SMTP server speaks enough of RFC 5321 for a client that logs in and sends one
mail per session (EHLO, AUTH PLAIN or LOGIN, MAIL, RCPT, DATA, QUIT); it offers no STARTTLS.
"""

from __future__ import annotations

import base64
import json
import socketserver
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Respond = Callable[[str, str, bytes], tuple[int, Any]]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class HTTPRecorder:
    def __init__(self, respond: Respond | None = None) -> None:
        self.requests: list[Request] = []
        self._respond = respond or (lambda _method, _path, _body: (200, {"ok": True}))
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.requests.append(Request(self.command, self.path, dict(self.headers.items()), body))
                status, answer = recorder._respond(self.command, self.path, body)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *_args: Any) -> None:  # quiet: the recorder is the log
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="http-recorder", daemon=True)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def to(self, path: str) -> list[Request]:
        """The requests received on a path."""
        return [r for r in self.requests if r.path == path]

    def __enter__(self) -> HTTPRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Mail:
    user: str = ""
    password: str = ""
    sender: str = ""
    recipients: list[str] = field(default_factory=list)
    data: str = ""


class SMTPRecorder:
    def __init__(self) -> None:
        self.messages: list[Mail] = []
        recorder = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")

            def read(self) -> str:
                return self.rfile.readline().decode("utf-8", "replace").rstrip("\r\n")

            def handle(self) -> None:
                mail = Mail()
                self.reply("220 127.0.0.1 loopback SMTP")
                while True:
                    line = self.read()
                    verb = line.split(" ", 1)[0].upper()
                    if not line:  # the client hung up
                        return
                    if verb in ("EHLO", "HELO"):
                        self.reply("250-127.0.0.1" if verb == "EHLO" else "250 127.0.0.1")
                        if verb == "EHLO":
                            self.reply("250 AUTH PLAIN LOGIN")
                    elif verb == "AUTH":
                        mail.user, mail.password = self.login(line.split(" ")[1:])
                        self.reply("235 2.7.0 Authentication successful")
                    elif verb == "MAIL":
                        mail.sender = line.partition(":")[2].strip().strip("<>")
                        self.reply("250 OK")
                    elif verb == "RCPT":
                        mail.recipients.append(line.partition(":")[2].strip().strip("<>"))
                        self.reply("250 OK")
                    elif verb == "DATA":
                        self.reply("354 End data with <CR><LF>.<CR><LF>")
                        lines = []
                        while (text := self.read()) != ".":
                            lines.append(text[1:] if text.startswith("..") else text)
                        mail.data = "\n".join(lines)
                        recorder.messages.append(mail)
                        mail = Mail(mail.user, mail.password)
                        self.reply("250 OK queued")
                    elif verb == "QUIT":
                        self.reply("221 Bye")
                        return
                    elif verb in ("RSET", "NOOP"):
                        self.reply("250 OK")
                    else:
                        self.reply("502 Command not implemented")

            def login(self, args: list[str]) -> tuple[str, str]:
                if args and args[0].upper() == "PLAIN":
                    token = args[1] if len(args) > 1 else self.ask("")
                    _, user, password = base64.b64decode(token).decode().split("\0")
                    return user, password
                user = base64.b64decode(self.ask("VXNlcm5hbWU6")).decode()  # "Username:"
                return user, base64.b64decode(self.ask("UGFzc3dvcmQ6")).decode()  # "Password:"

            def ask(self, prompt: str) -> str:
                self.reply(f"334 {prompt}")
                return self.read()

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="smtp-recorder", daemon=True)

    def __enter__(self) -> SMTPRecorder:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
