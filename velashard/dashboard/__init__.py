"""`velashard dashboard`: a web UI on 127.0.0.1 that reads the cluster with the user's own kubeconfig (as
`argocd admin dashboard` does), so the API server's RBAC decides what each person sees.

Informers (kube/informer.py) follow what the user may list; `rows`, `fleet`, `appsview`, `moves` and `appview`
are pure functions from that data to what the pages show; `server` holds the Flask routes and Jinja2 templates;
`live` turns watch events into debounced server-sent events, which htmx (vendored under static/) turns into
fragment reloads. No other package imports this one.
"""
