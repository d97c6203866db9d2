"""A step template's actions run in KubeVela's order. The template is evaluated with the step's parameter and
context; the first struct with a `#do` (fields in order, a struct's fields before itself, definitions skipped)
is an action: its provider runs it with its parameters, its result is filled back into the value (`$returns`, or
the action's own fields for vela/op), the value is evaluated again so that later fields see it, and the next
action is found, until none is left or one stops the step (a wait, suspend, fail or break). Bounded: a template
runs at most MAX_ACTIONS actions per pass, and each evaluation has the evaluator's limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from velashard.cue import CueError, Instance, Program, label_text, plain
from velashard.kube import errors
from velashard.workflow.providers import provider
from velashard.workflow.providers.base import ActionBreak, ProviderError, Runtime

MAX_ACTIONS = 64
DO, PROVIDER, PARAMS, RETURNS = "#do", "#provider", "$params", "$returns"

MakeRuntime = Callable[[str, Callable[[tuple], Any], str], Runtime]  # (field label, tags at a path, where) -> Runtime


class TemplateFailure(Exception):
    """The step errs (KubeVela's Execute): an action failed or the value is in conflict."""


@dataclass
class Planned:
    """An action a dry run found: where, which, and its parameters (or why they are not known yet)."""
    where: str
    action: str
    params: Any = None
    unknown: str = ""


@dataclass
class Run:
    instance: Instance
    planned: list[Planned] = field(default_factory=list)


def where(path: tuple) -> str:
    return ".".join(label_text(k) for k in path) or "(the template)"


def _params(instance: Instance, path: tuple) -> Any:
    try:
        return plain(instance.export_at(path))
    except CueError as err:
        if err.kind == "undefined" and err.message == "field not found":
            return {}
        raise


def run_actions(program: Program, data: dict[str, Any], make_runtime: MakeRuntime, dry_run: bool = False) -> Run:
    """Run a template's actions; TemplateFailure names the action and says what went wrong. A dry run calls no
    provider: it lists the actions with their parameters and fills nothing back."""
    fills: list[tuple[tuple, Any]] = []
    done: set[tuple] = set()
    instance = program.evaluate(data)
    run = Run(instance)
    while True:
        path = instance.find_task(DO, done)
        if path is None:
            break
        if len(done) >= MAX_ACTIONS:
            raise TemplateFailure(f"the template ran {MAX_ACTIONS} actions in one pass (a loop?): stopped")
        done.add(path)
        name, do = instance.string_at(path + (PROVIDER,)) or "", instance.string_at(path + (DO,)) or ""
        label = f"{where(path)} ({name}.{do})" if name else where(path)
        if any(type(k) is int for k in path):
            raise TemplateFailure(f"action {label}: an action inside a list is not supported; give it a field")
        found = provider(name)
        if found is None:
            raise TemplateFailure(f'action {label}: no provider "{name}"')
        handler = found.handlers.get(do)
        if handler is None:
            raise TemplateFailure(f'action {label}: provider "{name}" has no action "{do}"')
        params_path = path if found.legacy else path + (PARAMS,)
        try:
            params = _params(instance, params_path)
        except CueError as err:
            if dry_run:
                run.planned.append(Planned(where(path), f"{name}.{do}", unknown=str(err)))
                continue
            raise TemplateFailure(f"action {label}: its parameters are not complete: {err}") from None
        if not isinstance(params, dict):
            raise TemplateFailure(f"action {label}: its parameters must be a struct")
        if dry_run:
            run.planned.append(Planned(where(path), f"{name}.{do}", params))
            continue
        current = instance
        rt = make_runtime(label_text(path[-1]) if path else "",
                          lambda rel, at=params_path: current.tags_at(at + rel), where(path))
        try:
            result = handler(params, rt)
        except ActionBreak:
            return run
        except ProviderError as err:
            raise TemplateFailure(f"action {label}: {err}") from None
        except errors.Fenced:
            raise  # this shard may no longer act for the app: the reconcile stops, no step fails
        except errors.KubeError as err:  # refused (403), unreachable...: the step errs and is tried again
            raise TemplateFailure(f"action {label}: {err.message}") from None
        except (ValueError, TypeError, LookupError, OverflowError, UnicodeError) as err:
            # bad input a provider did not foresee is the step's failure, never the reconcile's
            raise TemplateFailure(f"action {label}: {type(err).__name__}: {err}") from None
        if result:
            fills.append((path if found.legacy else path + (RETURNS,), result))
            previous, instance = instance, program.evaluate(data, fills)
            run.instance = instance
            previous.release()  # replaced: its vertices go by reference counting, not the cyclic collector
    if not dry_run:
        problem = instance.error()
        if problem is not None:
            raise TemplateFailure(f"the step's value is in conflict: {problem}")
    return run
