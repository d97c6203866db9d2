"""Who an Application acts as (KubeVela's AuthenticateApplication): the author the master's webhook recorded
on it, or the default user when none was recorded. Pure; the flags that shape it are in `AuthConfig`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from velashard.apis import labels
from velashard.kube.client import Identity

# KubeVela's defaults (its flags and its chart's values).
DEFAULT_USER = "kubevela:vela-core"
DEFAULT_GROUP_PATTERN = "kubevela:*"
GROUP_SEPARATOR = ","
SERVICE_ACCOUNT_REFUSED = (f"annotation {labels.APP_SERVICE_ACCOUNT} is not permitted while applications are "
                           f"authenticated: an application acts as the user who wrote it")


@dataclass(frozen=True)
class AuthConfig:
    """--feature-gates=AuthenticateApplication, --authentication-with-user, --authentication-default-user and
    --authentication-group-pattern, with KubeVela's meaning (the gate on by default here)."""

    enabled: bool = True
    with_user: bool = True  # record the username; without, only groups are recorded and apps act as default_user
    default_user: str = DEFAULT_USER
    group_pattern: str = DEFAULT_GROUP_PATTERN

    def group_regex(self) -> str:
        """The pattern as an anchored regular expression: `*` matches anything, `|` separates alternatives."""
        return group_regex(self.group_pattern)


_REGEX_SPECIALS = frozenset("\\.+*?()|[]{}^$")


def _quote_meta(text: str) -> str:
    """Go's regexp.QuoteMeta (Helm's regexQuoteMeta), so the chart renders the very same expression."""
    return "".join("\\" + c if c in _REGEX_SPECIALS else c for c in text)


def group_regex(pattern: str) -> str:
    """KubeVela's pattern (`*` for any text) as a regular expression matching a whole group name; `|` separates
    alternatives. KubeVela searches unanchored, so `kubevela:*` also matched `not-kubevela:x`; here the whole
    name must match."""
    alternatives = [_quote_meta(part).replace("\\*", ".*") for part in pattern.split("|")]
    return "^(?:" + "|".join(alternatives) + ")$"


def recorded_groups(groups: list[str], config: AuthConfig) -> str:
    """The annotation value for a requester's groups: those matching the pattern, in order, comma-separated."""
    regex = re.compile(config.group_regex())
    return GROUP_SEPARATOR.join(g for g in groups if regex.match(g))


def author_annotations(user_info: dict[str, Any], config: AuthConfig) -> dict[str, str | None]:
    """What the webhook writes for a requester: username (removed, None, without --authentication-with-user)
    and group."""
    username = user_info.get("username") if isinstance(user_info.get("username"), str) else ""
    groups = [g for g in user_info.get("groups") or [] if isinstance(g, str)]
    return {labels.APP_USERNAME: username if config.with_user else None,
            labels.APP_GROUP: recorded_groups(groups, config)}


def has_author(app: dict[str, Any]) -> bool:
    annotations = (app.get("metadata") or {}).get("annotations") or {}
    return labels.APP_USERNAME in annotations or labels.APP_GROUP in annotations


def author_of(app: dict[str, Any], config: AuthConfig) -> Identity:
    """The identity the app acts as: its recorded user (the default user when none is recorded or usernames
    are not recorded) and recorded groups."""
    annotations = (app.get("metadata") or {}).get("annotations") or {}
    user = annotations.get(labels.APP_USERNAME) if config.with_user else None
    groups = tuple(g.strip() for g in str(annotations.get(labels.APP_GROUP) or "").split(GROUP_SEPARATOR)
                   if g.strip())
    return Identity(user if isinstance(user, str) and user else config.default_user, groups)


def unrecorded_author(app: dict[str, Any], config: AuthConfig) -> str | None:
    """Why a refused app acts as the default user, and what to check, when no author was recorded on it (it was
    written past the master's mutating webhook: before it was registered, while it was down, or by hand); None
    when an author was recorded or authentication is off."""
    if not config.enabled or has_author(app):
        return None
    return (f"no author was recorded on this application (annotation {labels.APP_USERNAME}), so it acts as the "
            f"default user {config.default_user}: it was written past the master's mutating webhook; check that "
            f"the webhook is registered (kubectl get mutatingwebhookconfigurations) and a master replica is Ready. "
            f"Its author's next change to its spec records them")


def refusal(app: dict[str, Any], config: AuthConfig) -> str | None:
    """Why the app may not run as it is, or None."""
    annotations = (app.get("metadata") or {}).get("annotations") or {}
    if config.enabled and labels.APP_SERVICE_ACCOUNT in annotations:
        return SERVICE_ACCOUNT_REFUSED
    return None
