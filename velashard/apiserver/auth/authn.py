"""Authentication for the embedded API server: static bearer tokens and ServiceAccount tokens.

Static tokens are random (the server makes one per user it writes a kubeconfig for; `admin` is in
`system:masters`) or come from a token file in kube-apiserver's `--token-auth-file` format; none is
shorter than 16 characters. ServiceAccount tokens are JWTs signed by the server, issued by TokenRequest
(`serviceaccounts/<name>/token`), bound to the ServiceAccount's uid (and optionally a Pod or
Secret) and valid until they expire. Impersonation headers are honoured once the authorizer lets
the caller `impersonate` the named user, groups or ServiceAccount.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import hmac
import json
import os
import threading
from datetime import datetime, timezone
from typing import Any, Callable

from velashard.apiserver import errors

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUTHENTICATED = "system:authenticated"
ANONYMOUS = {"username": "system:anonymous", "uid": "", "groups": ["system:unauthenticated"]}
SA_PREFIX = "system:serviceaccount:"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
_VERIFIED_CACHE = 4096
# A static token shorter than this could be guessed (a word, a name); token_urlsafe(32) makes 43 characters.
MIN_STATIC_TOKEN = 16

UserInfo = dict[str, Any]
# (group, resource, namespace, name) -> the object or None
Lookup = Callable[[str, str, str, str], "dict[str, Any] | None"]


def unauthorized() -> errors.APIError:
    return errors.APIError(401, "Unauthorized", "Unauthorized")


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    return {"username": f"{SA_PREFIX}{namespace}:{name}", "uid": uid,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED]}


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a ServiceAccount username, else None."""
    if not username.startswith(SA_PREFIX):
        return None
    parts = username[len(SA_PREFIX):].split(":")
    if len(parts) != 2 or not all(parts):
        return None
    return parts[0], parts[1]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authenticator:
    """Turns a request's bearer token into a user; thread-safe."""

    def __init__(self, lookup: Lookup, key: bytes | None = None):
        self._lookup = lookup
        self._key = key or os.urandom(32)
        self._kid = hashlib.sha256(self._key).hexdigest()[:16]
        self._lock = threading.Lock()
        self._static: dict[str, UserInfo] = {}
        self._verified: dict[str, dict[str, Any]] = {}

    def add_token(self, token: str, username: str, groups: list[str] | None = None, uid: str = "") -> None:
        """Accept `token` as `username` (in `groups` and system:authenticated)."""
        if len(token) < MIN_STATIC_TOKEN:
            raise ValueError(f"a static token must have at least {MIN_STATIC_TOKEN} characters")
        with self._lock:
            self._static[token] = {"username": username, "uid": uid,
                                   "groups": list(groups or []) + [AUTHENTICATED]}

    def authenticate(self, authorization: str, now: float) -> UserInfo:
        """The user a request's Authorization header names; anonymous without one, 401 for a bad token."""
        if not authorization:
            return dict(ANONYMOUS, groups=list(ANONYMOUS["groups"]))
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized()
        user = self._static.get(token)
        if user is not None:
            return dict(user, groups=list(user["groups"]))
        if token.count(".") == 2:
            return self._service_account_token(token, now)
        raise unauthorized()

    # --- ServiceAccount tokens -------------------------------------------------------------------

    def issue(self, service_account: dict[str, Any], spec: dict[str, Any], now: float) -> tuple[str, int]:
        """A signed token for `service_account` per a TokenRequest spec; returns it and its expiry (epoch)."""
        seconds = spec.get("expirationSeconds")
        seconds = DEFAULT_EXPIRATION if seconds is None else seconds
        meta = service_account["metadata"]
        claims: dict[str, Any] = {
            "aud": list(spec.get("audiences") or [ISSUER]), "iss": ISSUER, "iat": int(now), "nbf": int(now),
            "exp": int(now) + int(seconds), "sub": f"{SA_PREFIX}{meta['namespace']}:{meta['name']}",
            "kubernetes.io": {"namespace": meta["namespace"],
                              "serviceaccount": {"name": meta["name"], "uid": meta["uid"]}}}
        bound = spec.get("boundObjectRef") or {}
        if bound.get("kind"):
            claims["kubernetes.io"][bound["kind"].lower()] = {"name": bound.get("name", ""),
                                                             "uid": bound.get("uid", "")}
        header = _b64(json.dumps({"alg": "HS256", "kid": self._kid}, separators=(",", ":")).encode())
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = _b64(hmac.new(self._key, f"{header}.{body}".encode(), hashlib.sha256).digest())
        return f"{header}.{body}.{signature}", claims["exp"]

    def _service_account_token(self, token: str, now: float) -> UserInfo:
        claims = self._verified.get(token)
        if claims is None:
            claims = self._verify(token)
            with self._lock:
                if len(self._verified) >= _VERIFIED_CACHE:
                    self._verified.clear()
                self._verified[token] = claims
        return self._check_claims(claims, now)

    def _verify(self, token: str) -> dict[str, Any]:
        """The claims of a token this server signed (the signature is checked once per token)."""
        header, body, signature = token.split(".")
        expected = _b64(hmac.new(self._key, f"{header}.{body}".encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(expected, signature):
            raise unauthorized()
        try:
            claims = json.loads(_unb64(body))
            private = claims["kubernetes.io"]
            well_formed = (isinstance(private["namespace"], str) and isinstance(private["serviceaccount"]["name"], str)
                           and isinstance(claims["exp"], int))
        except (ValueError, KeyError, TypeError):
            raise unauthorized()
        if not well_formed:
            raise unauthorized()
        return claims

    def _check_claims(self, claims: dict[str, Any], now: float) -> UserInfo:
        """Still valid: not expired, for us, and the objects it is bound to are the same ones."""
        private = claims["kubernetes.io"]
        namespace, sa, expires = private["namespace"], private["serviceaccount"], int(claims["exp"])
        if now >= expires or ISSUER not in (claims.get("aud") or []):
            raise unauthorized()
        live = self._lookup("", "serviceaccounts", namespace, sa.get("name", ""))
        if live is None or live["metadata"].get("uid") != sa.get("uid"):
            raise unauthorized()  # the ServiceAccount the token is bound to is gone
        for kind, resource in (("pod", "pods"), ("secret", "secrets")):
            ref = private.get(kind)
            if ref:
                obj = self._lookup("", resource, namespace, ref.get("name", ""))
                if obj is None or (ref.get("uid") and obj["metadata"].get("uid") != ref["uid"]):
                    raise unauthorized()
        return service_account_user(namespace, sa["name"], sa.get("uid", ""))


def read_token_file(path: str) -> list[tuple[str, str, str, list[str]]]:
    """(token, user, uid, groups) of each line of a static token file, in kube-apiserver's
    `--token-auth-file` format: `token,user,uid,"group1,group2"` (groups optional).

    Raises ValueError naming the file and line for a malformed or guessable (short) token.
    """
    with open(path, newline="") as fh:
        try:
            return _token_entries(path, csv.reader(fh, strict=True))
        except (csv.Error, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: {err}") from None


def _token_entries(path: str, rows: Any) -> list[tuple[str, str, str, list[str]]]:
    entries = []
    for row in rows:
        number = rows.line_num
        if not "".join(row).strip():
            continue
        fields = [f.strip() for f in row]
        if len(fields) < 3 or not fields[0] or not fields[1]:
            raise ValueError(f"{path}:{number}: expected token,user,uid[,\"group1,group2\"]")
        if len(fields[0]) < MIN_STATIC_TOKEN:
            raise ValueError(f"{path}:{number}: the token has fewer than {MIN_STATIC_TOKEN} characters; "
                             "use a random one, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'")
        groups = [g.strip() for g in fields[3].split(",") if g.strip()] if len(fields) > 3 else []
        entries.append((fields[0], fields[1], fields[2], groups))
    return entries


def validate_token_request(spec: Any) -> list[dict[str, str]]:
    """Causes (field, message) of an invalid TokenRequest spec, as kube-apiserver words them."""
    if not isinstance(spec, dict):
        return [{"field": "spec", "message": "Required value", "reason": "FieldValueRequired"}]
    causes = []
    seconds = spec.get("expirationSeconds")
    if seconds is not None:
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            causes.append({"field": "spec.expirationSeconds", "reason": "FieldValueInvalid",
                           "message": f"Invalid value: {json.dumps(seconds)}: must be an integer"})
        elif seconds < MIN_EXPIRATION:
            causes.append({"field": "spec.expirationSeconds", "reason": "FieldValueInvalid",
                           "message": f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"})
        elif seconds > MAX_EXPIRATION:
            causes.append({"field": "spec.expirationSeconds", "reason": "FieldValueInvalid",
                           "message": f"Invalid value: {seconds}: may not specify a duration larger than 2^32 "
                                      "seconds"})
    audiences = spec.get("audiences")
    if audiences is not None and (not isinstance(audiences, list)
                                  or not all(isinstance(a, str) for a in audiences)):
        causes.append({"field": "spec.audiences", "reason": "FieldValueInvalid",
                       "message": "Invalid value: must be a list of strings"})
    return causes


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
