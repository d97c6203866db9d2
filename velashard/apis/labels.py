"""The label and annotation keys velashard reads and writes (KubeVela-compatible). One module owns them."""

# On controller pods: which shard a pod serves.
SHARD_ID = "controller.core.oam.dev/shard-id"
# On Applications, ApplicationRevisions and ResourceTrackers: which shard reconciles them.
SCHEDULED_SHARD_ID = "controller.core.oam.dev/scheduled-shard-id"
# Set by the master on an app it wants the owning shard to let go of (drain handshake).
DRAIN = "controller.core.oam.dev/drain"
# Annotation: the shard id the mutating webhook assigned on this request (it strips one a user sent),
# so that the shard-label guard (a ValidatingAdmissionPolicy) tells its choice from the user's.
ASSIGNED_BY_WEBHOOK = "controller.core.oam.dev/shard-assigned-by-webhook"
MASTER_SHARD_ID = "master"

# Discovery: controller pods carry this label.
POD_NAME_LABEL = "app.kubernetes.io/name"
POD_NAME_VALUE = "vela-core"

# On everything an Application renders, its revisions and trackers.
APP_NAME = "app.oam.dev/name"
APP_NAMESPACE = "app.oam.dev/namespace"
APP_COMPONENT = "app.oam.dev/component"
