"""The API server's heap and Python's cyclic garbage collector.

Nearly everything the server holds is stored objects and watch history: plain JSON dicts and lists, which
form no reference cycles and are freed by reference counting the moment they are replaced. The cyclic
collector still walks all of them in every full collection, which it runs each time the heap grew by a
quarter: at 12,000 of KubeVela's load-test apps that is gigabytes, a pause of seconds in which no request,
watch or simulated controller moves. After each full collection, what survived is frozen (gc.freeze): later
collections walk only what is new since. Frozen objects are still freed by reference counting; what a freeze
could keep is a cycle alive at that moment that dies later (a request's exception in flight), a few objects
per full collection.
"""

from __future__ import annotations

import gc
from typing import Any


def _freeze_after_full_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def freeze_survivors() -> None:
    """From now on, objects that survive a full collection are not walked again (once per process)."""
    if _freeze_after_full_collection not in gc.callbacks:
        gc.callbacks.append(_freeze_after_full_collection)
