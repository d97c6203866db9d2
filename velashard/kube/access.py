"""What this process may do itself, asked once per question with a SelfSubjectAccessReview
(authorization.k8s.io/v1) and remembered for the process's life."""

from __future__ import annotations

import logging
import threading

from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.resources import Resource
from velashard.observability import fields

log = logging.getLogger("velashard.kube.access")

SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class AccessReviews:
    def __init__(self, client: KubeClient):
        self.client = client
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str, str], bool] = {}

    def allowed(self, verb: str, res: Resource) -> bool:
        """May this process `verb` `res` in every namespace (cluster-wide)? False when the server cannot say."""
        key = (verb, res.group, res.plural)
        with self._lock:
            if key in self._answers:
                return self._answers[key]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": verb, "group": res.group, "resource": res.plural}}}
        try:
            answer = self.client.request("create", "POST", SELF_SUBJECT_ACCESS_REVIEWS, body=review)
            allowed = bool(((answer or {}).get("status") or {}).get("allowed"))
        except errors.KubeError as err:
            log.warning("cannot ask what this process may do; assuming it may not", extra=fields(
                verb=verb, resource=res.plural, group=res.group, error=str(err)))
            return False
        with self._lock:
            self._answers[key] = allowed
        return allowed

    def may_watch(self, res: Resource) -> bool:
        """Whether an informer of `res` across namespaces can run as this process (list and watch)."""
        return self.allowed("list", res) and self.allowed("watch", res)
