"""Connections to one API server: a urllib3 pool set up from a ClientConfig (TLS, client certificates, a proxy
from the kubeconfig or the environment), sending JSON bodies."""

from __future__ import annotations

import urllib.request
from typing import Any
from urllib.parse import urlsplit

import urllib3

from velashard.kube import jsoncodec
from velashard.kube.config import ClientConfig


def proxy_for(config: ClientConfig) -> str | None:
    """The kubeconfig's proxy-url, else $HTTPS_PROXY / $HTTP_PROXY unless $NO_PROXY exempts the server (as the
    official client and client-go do)."""
    if config.proxy_url:
        return config.proxy_url
    parts = urlsplit(config.host)
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass_environment(parts.netloc):
        return proxy
    return None


class Transport:
    """Sends requests over kept-alive connections; `maxsize` connections per server stay open."""

    def __init__(self, config: ClientConfig, maxsize: int = 64):
        options: dict[str, Any] = {
            "maxsize": maxsize,
            # urllib3 sends nothing again on its own: its retries would re-send a PUT or DELETE after a read error
            # past the write fence, which the client checks before each send (kube/fence.py). The client decides
            # what is sent again, and sends it through the fence (kube/client.py `resend_after`). The errors come
            # as raised, not wrapped in MaxRetryError, and redirects are answers, not followed.
            "retries": False}
        if config.host.startswith("https:"):
            options["ssl_context"] = config.ssl_context()
            if config.insecure:
                options.update(cert_reqs="CERT_NONE", assert_hostname=False)
            if config.tls_server_name:
                options["server_hostname"] = config.tls_server_name
        proxy = proxy_for(config)
        self.pool: urllib3.PoolManager = (urllib3.ProxyManager(proxy, **options) if proxy
                                          else urllib3.PoolManager(**options))

    def request(self, method: str, url: str, headers: dict[str, str], body: Any = None,
                timeout: float | tuple[float, float] = 60, stream: bool = False) -> urllib3.BaseHTTPResponse:
        """One request; the response's body is read by the caller (`stream`: as it arrives)."""
        payload = jsoncodec.dumps(body) if body is not None else None
        limit = (urllib3.Timeout(connect=timeout[0], read=timeout[1]) if isinstance(timeout, tuple)
                 else urllib3.Timeout(total=timeout))
        return self.pool.request(method, url, body=payload, headers=headers, timeout=limit,
                                 preload_content=not stream)
