"""Who this process is to the API server, asked with a SelfSubjectReview (authentication.k8s.io/v1)."""

from __future__ import annotations

import logging
from typing import Any

from velashard.kube import errors

log = logging.getLogger("velashard.kube.identity")

SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def whoami(client: Any) -> str | None:
    """The username the API server knows this client as; None (logged) when it cannot say."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {}}
    try:
        answer = client.request("create", "POST", SELF_SUBJECT_REVIEWS, body=review)
    except errors.KubeError as err:
        log.warning("cannot learn our identity with a SelfSubjectReview err=%s", err)
        return None
    username = (((answer or {}).get("status") or {}).get("userInfo") or {}).get("username")
    return username if isinstance(username, str) and username else None
