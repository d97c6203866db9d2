"""What a provider's action is given and may do: its parameters as plain data, and a Runtime with the step's
session (the app, the step, the run's context), the action state it may set (wait, suspend, fail, message), the
client that acts as the app's author, and the app's components through core's Delivery."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from velashard.kube.client import KubeClient
from velashard.workflow import cuefiles
from velashard.workflow import phases as ph
from velashard.workflow.context import WorkflowContext
from velashard.workflow.delivery import Delivery
from velashard.workflow.egress import EgressPolicy
from velashard.workflow.outbound import Outbound

LOCAL_CLUSTERS = ("", "local")


class ActionBreak(Exception):
    """The template's later actions do not run this time (a wait, suspend, fail or break said so)."""


class ProviderError(Exception):
    """The action failed; the step errs with this message (and is retried, KubeVela's Execute)."""


@dataclass
class Action:
    """KubeVela's executor as providers see it: the step's phase, reason and message so far."""
    phase: str = ph.SUCCEEDED
    reason: str = ""
    message: str = ""
    wait: bool = False
    suspend: bool = False
    terminated: bool = False
    previous_phase: str = ""  # the step's phase before this pass (a resumed step is `running`)

    def wait_for(self, message: str = "") -> None:
        self.wait = True
        if self.phase not in (ph.FAILED, ph.SUSPENDING):
            self.phase, self.reason = ph.RUNNING, ph.WAIT
            if message:
                self.message = message

    def suspend_step(self, message: str = "") -> None:
        if self.phase == ph.FAILED:
            return
        self.suspend = True
        self.phase, self.reason = ph.SUSPENDING, ph.SUSPEND
        if message:
            self.message = message

    def resume(self, message: str = "") -> None:
        self.suspend = False
        self.phase = ph.SUCCEEDED
        if message:
            self.message = message

    def fail(self, message: str = "") -> None:
        self.terminated = True
        self.phase, self.reason = ph.FAILED, ph.ACTION
        if message:
            self.message = message

    def terminate(self, message: str = "") -> None:
        self.terminated = True
        self.phase, self.reason = ph.SUCCEEDED, ph.TERMINATE
        if message:
            self.message = message

    def note(self, message: str) -> None:
        if message:
            self.message = message


@dataclass
class Runtime:
    app: dict[str, Any]
    step_name: str
    step_id: str
    step_type: str
    context: WorkflowContext
    action: Action
    author: KubeClient | None
    delivery: Delivery | None
    now: datetime
    group: str = ""
    field_label: str = ""  # the label of the action's field in the template (#Suspend records it)
    # the +patchKey/+patchStrategy comment tags at a path below the action's parameters
    tags: Callable[[tuple], Any] = field(default=lambda _path: None)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("velashard.workflow"))
    action_path: str = ""  # where the action is in the template (a call's result is for that action)
    # calls to the outside run there, apart from the reconcile workers (None: here, for a direct use)
    outbound: Outbound | None = None
    egress: EgressPolicy = EgressPolicy()

    @property
    def namespace(self) -> str:
        return self.app["metadata"].get("namespace", "default")

    def client(self) -> KubeClient:
        if self.author is None:
            raise ProviderError("no cluster to act on (a dry run)")
        return self.author

    def components(self) -> Delivery:
        if self.delivery is None:
            raise ProviderError("the app's components are not available here")
        return self.delivery


def local_only(cluster: Any) -> None:
    """Remote clusters are out of scope: an action aimed at one fails with a message that says so."""
    if cluster not in LOCAL_CLUSTERS and cluster is not None:
        raise ProviderError(f'cluster "{cluster}": only the local cluster is supported (no multi-cluster)')


Handler = Callable[[dict[str, Any], Runtime], "dict[str, Any] | None"]


@dataclass(frozen=True)
class Provider:
    """One CUE package: its import path, its actions, and its schema (our own, with KubeVela's field names), the
    file named for the path's last part beside this module (vela/op: op.cue)."""
    path: str
    name: str  # #provider
    handlers: dict[str, Handler]
    legacy: bool = False  # vela/op: parameters are the action's fields and results fill them (no $params)

    @property
    def schema(self) -> str:
        return cuefiles.read(__package__, self.path.rpartition("/")[2] + ".cue")
