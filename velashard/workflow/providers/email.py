"""vela/email: send an email over SMTP. The message goes out in the background (a slow server must not hold a
reconcile); the step waits meanwhile and goes on once it is sent, or fails with the server's answer. Port 465 is
SMTP over TLS; elsewhere STARTTLS is used when the server offers it, and a login when it asks for one."""

from __future__ import annotations

import smtplib
import ssl
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from email.message import EmailMessage
from email.utils import formataddr
from typing import Any

from velashard.workflow.providers.base import ActionBreak, Provider, ProviderError, Runtime

SCHEMA = '''
// Send an email; the step waits until it is sent.
#SendEmail: {
	#do:       "send"
	#provider: "email"
	$params: {
		from: {
			address:  string
			alias?:   string
			// +usage=the SMTP login's password ("" when the server needs none)
			password: string
			host:     string
			port:     int
		}
		to: [...string]
		content: {
			subject: string
			// +usage=sent as HTML
			body: string
		}
	}
	...
}
'''

TIMEOUT = 30.0
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="velashard-email")
_SENDING: dict[str, Future] = {}  # step session id -> the send in flight or done
_LOCK = threading.Lock()


def _message(params: dict[str, Any]) -> tuple[EmailMessage, dict[str, Any]]:
    sender = params.get("from") or {}
    content = params.get("content") or {}
    to = params.get("to") or []
    if not sender.get("address") or not sender.get("host") or not isinstance(sender.get("port"), int):
        raise ProviderError("from needs address, host and port")
    if not to or not all(isinstance(t, str) for t in to):
        raise ProviderError("to needs at least one address")
    message = EmailMessage()
    message["From"] = formataddr((sender.get("alias") or "", sender["address"]))
    message["To"] = ", ".join(to)
    message["Subject"] = str(content.get("subject", ""))
    message.set_content(str(content.get("body", "")), subtype="html")
    return message, sender


def _send(message: EmailMessage, sender: dict[str, Any]) -> None:
    host, port = sender["host"], sender["port"]
    context = ssl.create_default_context()
    if port == 465:
        server: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=TIMEOUT, context=context)
    else:
        server = smtplib.SMTP(host, port, timeout=TIMEOUT)
    with server:
        server.ehlo()
        if port != 465 and server.has_extn("starttls"):
            server.starttls(context=context)
            server.ehlo()
        if sender.get("password") and server.has_extn("auth"):
            server.login(sender["address"], sender["password"])
        server.send_message(message)


def send(params: dict[str, Any], rt: Runtime) -> None:
    with _LOCK:
        sending = _SENDING.get(rt.step_id)
    if sending is None:
        message, sender = _message(params)
        with _LOCK:
            _SENDING[rt.step_id] = _POOL.submit(_send, message, sender)
    elif sending.done():
        with _LOCK:
            _SENDING.pop(rt.step_id, None)
        problem = sending.exception()
        if problem is None:
            return None
        raise ProviderError(f"failed to send email: {problem}")
    rt.action.wait_for("wait for the email")
    raise ActionBreak()


HANDLERS = {"send": send}
PROVIDER = Provider("vela/email", "email", SCHEMA, HANDLERS)
