"""Where the API server is and how to prove who we are: kubeconfig files as kubectl reads them, and the in-cluster
ServiceAccount.

Read without the official client library, whose import costs every process some 22 MiB (all its generated API
and model classes) for the few functions used here. Supported: servers over HTTP or HTTPS with a CA (file or
data), insecure-skip-tls-verify, tls-server-name and proxy-url; users with a token, a tokenFile, a client
certificate (file or data), username and password, or an exec credential plugin (client.authentication.k8s.io
v1 and v1beta1, its token refreshed when it expires); a 401 renews a token (the file read again, the plugin run
again) once (kube/client.py); $KUBECONFIG lists merged as kubectl merges them (the first
file to name something wins). The legacy auth-provider plugins were removed from kubectl and are refused here.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

import yaml

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REREAD_SECONDS = 60.0  # a projected ServiceAccount token is rotated in place; client-go rereads it too


class ConfigError(Exception):
    pass


@dataclass
class ClientConfig:
    """One API server and one identity: what a client needs to connect and authenticate."""

    host: str
    ca_data: bytes | None = None  # PEM; None: the system's CAs
    insecure: bool = False
    tls_server_name: str | None = None
    cert_data: bytes | None = None  # PEM client certificate and key
    key_data: bytes | None = None
    proxy_url: str | None = None
    token: Callable[[], str | None] = field(default=lambda: None)  # the bearer token now (may be refreshed)
    basic: tuple[str, str] | None = None
    renew: Callable[[], None] = field(default=lambda: None)  # read or fetch the token again, now
    _renewing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def refreshed(self, used: str | None) -> bool:
        """After a 401 to a request sent with the Authorization `used`: renew the credentials (reread the token
        file, run the exec plugin again) unless another request did meanwhile. True when they changed, so that
        sending again may succeed."""
        with self._renewing:
            if self.authorization() == used:
                try:
                    self.renew()
                except (OSError, ConfigError):
                    return False  # the 401 stands; the next request tries again
            return self.authorization() != used

    def authorization(self) -> str | None:
        token = self.token()
        if token:
            return f"Bearer {token}"
        if self.basic is not None:
            return "Basic " + base64.b64encode(f"{self.basic[0]}:{self.basic[1]}".encode()).decode()
        return None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_data and self.key_data:
            # The ssl module loads client certificates from files only: a private file, gone at once.
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "client.pem")
                with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                    fh.write(self.cert_data + b"\n" + self.key_data)
                context.load_cert_chain(path)
        return context


def load(kubeconfig: str | None = None) -> ClientConfig:
    """`kubeconfig` if given, else the in-cluster config inside a pod, else $KUBECONFIG or ~/.kube/config."""
    if kubeconfig:
        if not os.path.exists(kubeconfig):
            raise FileNotFoundError(f"kubeconfig {kubeconfig} does not exist")
        return from_kubeconfig([kubeconfig])
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p] or ["~/.kube/config"]
    paths = [os.path.expanduser(p) for p in paths]
    existing = [p for p in paths if os.path.exists(p)]
    if not existing:
        raise ConfigError(f"no kubeconfig found (looked at {', '.join(paths)}) and not running in a cluster")
    return from_kubeconfig(existing)


def in_cluster(directory: str = SERVICE_ACCOUNT_DIR) -> ClientConfig:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set in a cluster")
    token_file = os.path.join(directory, "token")
    if not os.path.exists(token_file):
        raise ConfigError(f"no ServiceAccount token at {token_file}")
    with open(os.path.join(directory, "ca.crt"), "rb") as fh:
        ca = fh.read()
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    token = FileToken(token_file)
    return ClientConfig(server, ca_data=ca, token=token, renew=token.reread)


def from_kubeconfig(paths: list[str]) -> ClientConfig:
    """The current context of the kubeconfig files `paths`, merged (the first to name an entry wins)."""
    docs = []
    for path in paths:
        with open(path) as fh:
            docs.append((os.path.dirname(os.path.abspath(path)), yaml.safe_load(fh) or {}))
    current = next((d.get("current-context") for _, d in docs if d.get("current-context")), None)
    if not current:
        raise ConfigError("the kubeconfig has no current-context")
    context, _ = _named(docs, "contexts", current, "context")
    cluster, cluster_dir = _named(docs, "clusters", context.get("cluster"), "cluster")
    user, user_dir = _named(docs, "users", context.get("user"), "user") if context.get("user") else ({}, "")
    if not cluster.get("server"):
        raise ConfigError(f'cluster "{context.get("cluster")}" has no server')
    if user.get("auth-provider"):
        raise ConfigError("auth-provider plugins are not supported (kubectl removed them): use an exec plugin")
    config = ClientConfig(str(cluster["server"]).rstrip("/"),
                          ca_data=_data(cluster, "certificate-authority", cluster_dir),
                          insecure=bool(cluster.get("insecure-skip-tls-verify")),
                          tls_server_name=cluster.get("tls-server-name"), proxy_url=cluster.get("proxy-url"),
                          cert_data=_data(user, "client-certificate", user_dir),
                          key_data=_data(user, "client-key", user_dir))
    if user.get("token"):
        token = str(user["token"])
        config.token = lambda: token
    elif user.get("tokenFile"):
        token_file = FileToken(_path(user["tokenFile"], user_dir))
        config.token, config.renew = token_file, token_file.reread
    elif user.get("username") is not None:
        config.basic = (str(user["username"]), str(user.get("password") or ""))
    if user.get("exec"):
        plugin = ExecPlugin(user["exec"], cluster)
        credential = plugin.credential()  # at once: a broken plugin is a configuration error
        if credential.get("clientCertificateData"):
            config.cert_data = credential["clientCertificateData"].encode()
            config.key_data = str(credential.get("clientKeyData", "")).encode()
        config.token, config.renew = plugin.token, plugin.renew
    return config


def _named(docs: list[tuple[str, dict]], section: str, name: Any, key: str) -> tuple[dict[str, Any], str]:
    for directory, doc in docs:
        for entry in doc.get(section) or []:
            if entry.get("name") == name:
                return entry.get(key) or {}, directory
    raise ConfigError(f'the kubeconfig has no {section[:-1]} named "{name}"')


def _path(path: str, directory: str) -> str:
    return path if os.path.isabs(path) else os.path.join(directory, path)


def _data(entry: dict[str, Any], name: str, directory: str) -> bytes | None:
    """`<name>-data` (base64) or the file `<name>` (relative to its kubeconfig)."""
    if entry.get(f"{name}-data"):
        return base64.b64decode(entry[f"{name}-data"])
    if entry.get(name):
        with open(_path(entry[name], directory), "rb") as fh:
            return fh.read()
    return None


class FileToken:
    """A token read from a file, and read again every minute or when asked (a projected ServiceAccount token is
    rotated in place, and the old one may be revoked before the minute is up)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._token = ""
        self._read = -TOKEN_REREAD_SECONDS

    def __call__(self) -> str | None:
        with self._lock:
            if time.monotonic() - self._read >= TOKEN_REREAD_SECONDS:
                self._reread()
            return self._token or None

    def reread(self) -> None:
        with self._lock:
            self._reread()

    def _reread(self) -> None:
        with open(self.path) as fh:
            self._token = fh.read().strip()
        self._read = time.monotonic()


class ExecPlugin:
    """A credential plugin (kubectl's `users[].user.exec`): run for an ExecCredential, again once it expires."""

    def __init__(self, spec: dict[str, Any], cluster: dict[str, Any]):
        self.spec, self.cluster = spec, cluster
        self._lock = threading.Lock()
        self._status: dict[str, Any] | None = None
        self._expires: float | None = None

    def credential(self) -> dict[str, Any]:
        with self._lock:
            if self._status is None or (self._expires is not None and time.time() >= self._expires - 10):
                self._status = self._run()
                self._expires = _expiry(self._status)
            return self._status

    def token(self) -> str | None:
        return self.credential().get("token")

    def renew(self) -> None:
        """Run the plugin again now: the server refused its token before the expiry it gave, if any."""
        status = self._run()
        with self._lock:
            self._status, self._expires = status, _expiry(status)

    def _run(self) -> dict[str, Any]:
        api_version = self.spec.get("apiVersion") or "client.authentication.k8s.io/v1"
        info: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
        if self.spec.get("provideClusterInfo"):
            info["spec"]["cluster"] = {k: v for k, v in {
                "server": self.cluster.get("server"), "tls-server-name": self.cluster.get("tls-server-name"),
                "insecure-skip-tls-verify": self.cluster.get("insecure-skip-tls-verify"),
                "certificate-authority-data": self.cluster.get("certificate-authority-data")}.items() if v}
        env = dict(os.environ, KUBERNETES_EXEC_INFO=json.dumps(info))
        env.update({e["name"]: str(e.get("value", "")) for e in self.spec.get("env") or []})
        argv = [self.spec.get("command", "")] + [str(a) for a in self.spec.get("args") or []]
        try:
            done = subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            hint = self.spec.get("installHint")
            raise ConfigError(f"exec plugin {argv[0]!r} failed: {err}" + (f"; {hint}" if hint else "")) from None
        if done.returncode != 0:
            raise ConfigError(f"exec plugin {argv[0]!r} exited with {done.returncode}: "
                              f"{done.stderr.decode(errors='replace').strip()[:500]}")
        try:
            status = json.loads(done.stdout).get("status") or {}
        except ValueError as err:
            raise ConfigError(f"exec plugin {argv[0]!r} printed no ExecCredential: {err}") from None
        if not status.get("token") and not status.get("clientCertificateData"):
            raise ConfigError(f"exec plugin {argv[0]!r} returned neither a token nor a client certificate")
        return status


def _expiry(status: dict[str, Any]) -> float | None:
    stamp = status.get("expirationTimestamp")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None
