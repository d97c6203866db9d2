"""A provider's call to the outside world (an HTTP request, an email, a Prometheus query), made apart from the
reconcile workers (workflow/outbound.py): the first pass submits it and the step waits; the pass after it ends
takes the result, or fails the step with the reason."""

from __future__ import annotations

from typing import Any, Callable

from velashard.workflow.netcalls import CallError
from velashard.workflow.outbound import Busy, call_key
from velashard.workflow.providers.base import ActionBreak, ProviderError, Runtime


def outside(rt: Runtime, what: str, params: Any, fn: Callable[[], Any],
            admit: Callable[[], None] = lambda: None) -> Any:
    """`fn()`'s value once it has run; meanwhile the step waits (ActionBreak). `what` names the call in the
    step's message; `admit()` runs before the call is made, and may refuse it (ProviderError)."""
    if rt.outbound is None:
        admit()
        return _failure_as_provider_error(what, fn)
    meta = rt.app["metadata"]
    key = call_key(str(meta.get("uid") or meta["name"]), rt.step_id, rt.action_path, params)
    done = rt.outbound.take(key)
    if done is not None:
        if done.error is not None:
            raise ProviderError(_reason(what, done.error))
        return done.value
    if not rt.outbound.running(key):
        admit()
        try:
            rt.outbound.submit(key, rt.namespace, f'{rt.namespace}/{meta["name"]}', fn)
        except Busy as err:
            raise ProviderError(f"{what}: {err}") from None
    rt.action.wait_for(f"waiting for {what}")
    raise ActionBreak()


def _failure_as_provider_error(what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except ProviderError:
        raise
    except Exception as err:
        raise ProviderError(_reason(what, err)) from None


def _reason(what: str, err: BaseException) -> str:
    if isinstance(err, (CallError, ProviderError)):
        return str(err)
    return f"{what}: {err}"
