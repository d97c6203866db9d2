"""The TemplateValid condition of every definition, written by the master (or the one unsharded controller):
where no validating webhook refused a broken definition, its status says what is wrong and where."""

from __future__ import annotations

import logging

from velashard.apis.oam import DEFINITION_RESOURCES
from velashard.core.defcheck import CONDITION, definition_condition
from velashard.core.events import timestamp
from velashard.kube import errors
from velashard.kube.controller import DONE, Controller, Result
from velashard.kube.manager import Manager
from velashard.observability import fields

log = logging.getLogger("velashard.core.defstatus")


class DefinitionChecker:
    """Writes the TemplateValid condition of every definition (once per generation, only when it changes)."""

    def __init__(self, manager: Manager) -> None:
        self.client = manager.client
        self.informers = {kind: manager.informer(res) for kind, res in DEFINITION_RESOURCES.items()}
        self.controller = Controller("definitions", self._reconcile, 1)
        for kind, informer in self.informers.items():
            self.controller.watch(informer, to_keys=lambda obj, kind=kind: [
                f'{kind}/{obj["metadata"].get("namespace", "")}/{obj["metadata"]["name"]}'])
        manager.add_controller(self.controller)

    def _reconcile(self, key: str) -> Result:
        kind, namespace, name = key.split("/", 2)
        definition = self.informers[kind].store.get_by(namespace, name)
        if definition is None:
            return DONE
        definition = {**definition, "kind": kind}
        wanted = definition_condition(definition, timestamp())
        current = [c for c in (definition.get("status") or {}).get("conditions") or []
                   if c.get("type") == CONDITION]
        if current and all(current[0].get(k) == wanted[k] for k in ("status", "reason", "message")):
            return DONE
        others = [c for c in (definition.get("status") or {}).get("conditions") or [] if c.get("type") != CONDITION]
        try:
            self.client.patch_status(DEFINITION_RESOURCES[kind], name, {"status": {"conditions": others + [wanted]}},
                                     namespace)
        except errors.NotFound:
            return DONE
        if wanted["status"] == "False":
            log.warning("definition cannot run", extra=fields(key=key, reason=wanted["reason"],
                                                              message=wanted["message"]))
        return DONE
