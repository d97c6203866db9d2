"""The embedded Kubernetes API server, for development, tests and benchmarks (`velashard apiserver`).

Layers, bottom to top: `errors` (API errors as Status objects), `storage` (the store, selectors,
validation, conversion, managed fields), `admission` (webhooks and ValidatingAdmissionPolicy), `registry`
(the REST verbs with per-kind strategies), `auth` (authentication, RBAC, reviews), `controllers`
(kube-controller-manager's loops), `simulation` (KWOK-style nodes, pods and workloads), `http` (the server).
Production code never imports this package (docs/architecture.md; tests/unit/test_architecture.py).
"""
