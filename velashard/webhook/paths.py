"""Where the admission webhooks are served: the URL paths the webhook configurations name."""

MUTATING_PATH = "/mutating-core-oam-dev-v1beta1-applications"
VALIDATING_PATH = "/validating-core-oam-dev-v1beta1-applications"
DEFINITIONS_PATH = "/validating-core-oam-dev-v1beta1-definitions"
