"""Where the admission webhooks are served (the URL paths the webhook configurations name), and the largest review
they take."""

MUTATING_PATH = "/mutating-core-oam-dev-v1beta1-applications"
VALIDATING_PATH = "/validating-core-oam-dev-v1beta1-applications"
DEFINITIONS_PATH = "/validating-core-oam-dev-v1beta1-definitions"

MAX_REVIEW_BYTES = 4 * 1024 * 1024  # a larger body is answered 413
