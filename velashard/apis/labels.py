"""Every label, annotation and finalizer key velashard reads or writes (KubeVela-compatible), and the master
shard id. One module owns them; the one Kubernetes key among them (kubectl's last-applied annotation) is
defined in kube/resources.py, below this package, and listed here."""

from velashard.kube import resources

# On controller pods: which shard a pod serves.
SHARD_ID = "controller.core.oam.dev/shard-id"
# On Applications, ApplicationRevisions and ResourceTrackers: which shard reconciles them.
SCHEDULED_SHARD_ID = "controller.core.oam.dev/scheduled-shard-id"
# Set by the master on an app it wants the owning shard to let go of (drain handshake).
DRAIN = "controller.core.oam.dev/drain"
# Annotation: the shard id the mutating webhook assigned on this request (it strips one a user sent),
# so that the shard-label guard (a ValidatingAdmissionPolicy) tells its choice from the user's.
ASSIGNED_BY_WEBHOOK = "controller.core.oam.dev/shard-assigned-by-webhook"
# Annotation: the master's signature over the app's namespace, name and shard (sharding/proof.py); the owning
# shard hands an app without a valid one back to the scheduler instead of running it.
ASSIGNMENT_PROOF = "controller.core.oam.dev/shard-assignment-proof"
MASTER_SHARD_ID = "master"
# Annotations on the Events of a placement, a move or a drain (Scheduled, Rescheduled, Draining): the shards and
# why, as data for readers such as the dashboard (the message says the same in words).
EVENT_FROM_SHARD = "velashard.io/from-shard"
EVENT_TO_SHARD = "velashard.io/to-shard"
EVENT_MOVE_REASON = "velashard.io/reason"
# When the master first saw the shard an orphaned app left unavailable (RFC 3339): a failover's t0.
EVENT_SHARD_LOST_AT = "velashard.io/shard-lost-at"

# Discovery: controller pods carry this label.
POD_NAME_LABEL = "app.kubernetes.io/name"
POD_NAME_VALUE = "vela-core"

# On everything an Application renders, its revisions and trackers.
APP_NAME = "app.oam.dev/name"
APP_NAMESPACE = "app.oam.dev/namespace"
APP_COMPONENT = "app.oam.dev/component"
# KubeVela's marks of where a rendered resource came from (read back by resource-policy selectors).
APP_REVISION = "app.oam.dev/appRevision"
RESOURCE_TYPE = "app.oam.dev/resourceType"  # WORKLOAD or TRAIT
WORKLOAD_TYPE = "workload.oam.dev/type"  # the component's type, on the workload
TRAIT_TYPE = "trait.oam.dev/type"  # the trait that produced an output (AuxiliaryWorkload: the component's)
TRAIT_RESOURCE = "trait.oam.dev/resource"  # the output's key in its template

# On Applications: held until what the app owns is deleted.
RESOURCE_TRACKER_FINALIZER = "app.oam.dev/resource-tracker-finalizer"

# On managed resources: what we applied last, for the next three-way merge.
LAST_APPLIED = "app.oam.dev/last-applied-configuration"
# kubectl's record of the same is Kubernetes' key, defined where the informers that drop it can reach it.
KUBECTL_LAST_APPLIED = resources.KUBECTL_LAST_APPLIED

# On shard Leases (labelled with SHARD_ID): the shard's app count, its load report.
APPS_ANNOTATION = "velashard.io/applications"
# On Applications: how long the workflow may run before the app gets WorkflowDeadline=False (a Go duration;
# the controller's --workflow-deadline otherwise).
WORKFLOW_DEADLINE = "velashard.io/workflow-deadline"
# Beside it: how many of them the shard has reconciled since they arrived (equal once a takeover is complete).
RECONCILED_ANNOTATION = "velashard.io/reconciled"

# On Applications: who wrote the app (KubeVela's AuthenticateApplication). The mutating webhook records the
# requesting user and the groups that match the group pattern (comma-separated); the controller acts as them.
APP_USERNAME = "app.oam.dev/username"
APP_GROUP = "app.oam.dev/group"
# KubeVela's older way to name an identity; refused while authentication is on (anyone could name any account).
APP_SERVICE_ACCOUNT = "app.oam.dev/service-account-name"

# On what a WorkflowRun's steps apply (kubevela/workflow's labels): the run's name and namespace.
WORKFLOW_RUN_NAME = "workflowrun.oam.dev/name"
WORKFLOW_RUN_NAMESPACE = "workflowrun.oam.dev/namespace"
