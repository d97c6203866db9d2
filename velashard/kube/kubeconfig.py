"""Kubeconfig files that carry credentials: written readable by their owner only, and read back for the token."""

from __future__ import annotations

import os
import secrets
from typing import Any

import yaml

PRIVATE_MODE = 0o600


def write_private(path: str, text: str) -> str:
    """Write `text` to `path` so that only its owner can read it, from the first byte on.

    The file is created with mode 0600 (never chmod-ed afterwards, which would leave a window in which
    others could open it) beside `path` and renamed over it, so an existing file of any mode is replaced
    whole and readers never see half a file.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_kubeconfig(path: str, document: dict[str, Any]) -> str:
    """Write a kubeconfig document privately (it holds a bearer token)."""
    return write_private(path, yaml.safe_dump(document, sort_keys=False))


def bearer_token(path: str) -> str:
    """The bearer token of the current context's user in the kubeconfig at `path`.

    Raises ValueError when the current context names no user with a token.
    """
    with open(path) as fh:
        doc = yaml.safe_load(fh) or {}
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}
    user_name = contexts.get(doc.get("current-context"), {}).get("user")
    for user in doc.get("users") or []:
        if user.get("name") == user_name and (user.get("user") or {}).get("token"):
            return str(user["user"]["token"])
    raise ValueError(f"kubeconfig {path}: the current context's user has no bearer token")
