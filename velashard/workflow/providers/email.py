"""vela/email: send an email over SMTP. The message goes out apart from the reconcile workers (calls.py), to
where the egress policy allows; the step waits meanwhile and goes on once it is sent, or fails with the
server's answer. Port 465 is SMTP over TLS; elsewhere STARTTLS is used when the server offers it, and a login
when it asks for one. A header that would carry CR or LF fails the step."""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formataddr
from typing import Any

from velashard.workflow.egress import EgressPolicy
from velashard.workflow.netcalls import SMTP, CallError, SMTPOverTLS
from velashard.workflow.providers.base import Provider, ProviderError, Runtime
from velashard.workflow.providers.calls import outside

TIMEOUT = 30.0


def _message(params: dict[str, Any]) -> tuple[EmailMessage, dict[str, Any]]:
    sender = params.get("from") or {}
    content = params.get("content") or {}
    to = params.get("to") or []
    if not sender.get("address") or not sender.get("host") or not isinstance(sender.get("port"), int):
        raise ProviderError("from needs address, host and port")
    if not 0 < sender["port"] < 65536:
        raise ProviderError(f'from.port {sender["port"]}: must be 1-65535')
    if not to or not all(isinstance(t, str) for t in to):
        raise ProviderError("to needs at least one address")
    message = EmailMessage()
    try:  # a header with CR or LF would add headers of its own: the email package refuses it
        message["From"] = formataddr((str(sender.get("alias") or ""), str(sender["address"])))
        message["To"] = ", ".join(to)
        message["Subject"] = str(content.get("subject", ""))
        message.set_content(str(content.get("body", "")), subtype="html")
    except (ValueError, TypeError) as err:
        raise ProviderError(f"the email cannot be written: {err}") from None
    return message, sender


def _send(policy: EgressPolicy, message: EmailMessage, sender: dict[str, Any]) -> None:
    host, port = str(sender["host"]), sender["port"]
    context = ssl.create_default_context()
    try:
        if port == 465:
            server: smtplib.SMTP = SMTPOverTLS(policy, TIMEOUT, context)
        else:
            server = SMTP(policy, TIMEOUT)
        with server:
            server.connect(host, port)
            server.ehlo()
            if port != 465 and server.has_extn("starttls"):
                server.starttls(context=context)
                server.ehlo()
            if sender.get("password") and server.has_extn("auth"):
                server.login(sender["address"], sender["password"])
            server.send_message(message)
    except CallError:
        raise
    except (smtplib.SMTPException, OSError, ValueError) as err:
        raise CallError(f"failed to send email: {err}") from None


def send(params: dict[str, Any], rt: Runtime) -> None:
    message, sender = _message(params)
    policy = rt.egress
    outside(rt, f'the email to {", ".join(params.get("to") or [])} via {sender["host"]}:{sender["port"]}', params,
            lambda: _send(policy, message, sender))
    return None


HANDLERS = {"send": send}
PROVIDER = Provider("vela/email", "email", HANDLERS)
