"""Who may do what: authentication (tokens, ServiceAccount JWTs, impersonation), RBAC, the review APIs."""
