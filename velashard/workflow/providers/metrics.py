"""vela/metrics: PromCheck, a Prometheus query compared with a condition until the result has held for
`duration` (the check passes) or failed for `failDuration` (the check fails). It asks Prometheus' HTTP API
(/api/v1/query) for one value, apart from the reconcile workers and where the egress policy allows (the answer
is capped); the times it started to hold or to fail are kept in the run's context."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from velashard.cue import CueError, compile_sources
from velashard.durations import go_duration
from velashard.workflow import netcalls
from velashard.workflow.egress import EgressPolicy
from velashard.workflow.providers.base import Provider, ProviderError, Runtime
from velashard.workflow.providers.calls import outside

TIMEOUT = 10.0
MAX_ANSWER = 1 << 20  # one value is a few hundred bytes; a larger answer is not Prometheus' (or not one value)


def query_value(policy: EgressPolicy, endpoint: str, query: str, now: float) -> str:
    """The one value a query returns, as Prometheus writes it."""
    url = endpoint.rstrip("/") + "/api/v1/query?" + urlencode({"query": query, "time": f"{now:.3f}"})
    answer = netcalls.request(policy, "GET", url, None, {}, TIMEOUT, MAX_ANSWER)
    try:
        parsed = json.loads(answer.body or b"{}")
    except ValueError:
        raise ProviderError(f"query {url}: the answer is not JSON (HTTP {answer.status})") from None
    if not isinstance(parsed, dict) or parsed.get("status") != "success":
        problem = parsed.get("error") if isinstance(parsed, dict) else None
        raise ProviderError(f'query {url}: {problem or f"HTTP {answer.status}"}')
    data = parsed.get("data") or {}
    result = data.get("result")
    if data.get("resultType") == "scalar" and isinstance(result, list) and len(result) == 2:
        return str(result[1])
    if data.get("resultType") == "vector" and isinstance(result, list):
        if len(result) != 1:
            raise ProviderError(f"the query returns {len(result)} results where it should return one: review it")
        return str((result[0].get("value") or [None, ""])[1])
    raise ProviderError(f'the query returns a {data.get("resultType")}, not one value')


def holds(value: str, condition: str) -> bool:
    """`<value> <condition>` as CUE compares it (">=0.95", "==1")."""
    try:
        number = float(value)
    except ValueError:
        raise ProviderError(f'the query result "{value}" is not a number') from None
    try:
        result = compile_sources({"check.cue": f"result: {number!r} {condition}\n"}).evaluate().export("result")
    except CueError as err:
        raise ProviderError(f'condition "{condition}": {err}') from None
    if not isinstance(result, bool):
        raise ProviderError(f'condition "{condition}" does not compare the value')
    return result


def _seconds(text: Any, what: str) -> float:
    try:
        return go_duration(text)
    except ValueError:
        raise ProviderError(f'{what} "{text}" is not a duration like 5m') from None


def prom_check(params: dict[str, Any], rt: Runtime) -> dict[str, Any]:
    endpoint, query, policy, at = str(params.get("metricEndpoint") or ""), str(params.get("query") or ""), \
        rt.egress, rt.now.timestamp()
    value = outside(rt, f"the query {query!r} to {endpoint}", params,
                    lambda: query_value(policy, endpoint, query, at))
    condition = str(params.get("condition") or "")
    now = rt.now.timestamp()
    ctx, sid = rt.context, rt.step_id
    if holds(value, condition):
        ctx.delete_mutable(sid, "metrics", "fail", "time")
        since = ctx.get_mutable(sid, "metrics", "success", "time")
        if not since:
            ctx.set_mutable(str(int(now)), sid, "metrics", "success", "time")
            return {"result": False, "failed": False,
                    "message": f"The condition {condition} holds (the query returns {value}); it must hold for "
                               f'{params.get("duration")}.'}
        if now - int(since) >= _seconds(params.get("duration"), "duration"):
            return {"result": True, "failed": False, "message": "The metric check has passed."}
        return {"result": False, "failed": False,
                "message": f"The condition {condition} has held for {int(now - int(since))}s (the query returns "
                           f'{value}); it must hold for {params.get("duration")}.'}
    ctx.delete_mutable(sid, "metrics", "success", "time")
    since = ctx.get_mutable(sid, "metrics", "fail", "time")
    if not since:
        ctx.set_mutable(str(int(now)), sid, "metrics", "fail", "time")
        since = str(int(now))
    failing = now - int(since)
    if failing >= _seconds(params.get("failDuration"), "failDuration"):
        return {"result": False, "failed": True,
                "message": f"The condition {condition} has not held for {int(failing)}s (the query returns {value}); "
                           f'the check fails after {params.get("failDuration")}.'}
    return {"result": False, "failed": False,
            "message": f"The condition {condition} does not hold (the query returns {value}); the check fails if it "
                       f'still does not after {params.get("failDuration")}.'}


HANDLERS = {"promCheck": prom_check}
PROVIDER = Provider("vela/metrics", "metrics", HANDLERS)
