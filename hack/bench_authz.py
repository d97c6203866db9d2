"""Cost of authentication and RBAC per request on the embedded API server, printing one JSON object.

Side by side in one run against one `velashard apiserver` process: GETs of one ConfigMap sent as
`admin` (system:masters: no rule is evaluated) and as a ServiceAccount whose token is verified
and whose rules are looked up among many bindings (`--bindings` RoleBindings and ClusterRoleBindings
for other subjects, plus its own). The ratio is what RBAC adds to a cheap request.

    python hack/bench_authz.py [--requests 3000] [--bindings 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import time

from bench_apiserver import start_server  # hack/ is on sys.path when run as a script

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def call(conn: http.client.HTTPConnection, method: str, path: str, token: str, body: dict | None = None) -> dict:
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, payload, {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
    return json.loads(data)


def setup(conn: http.client.HTTPConnection, admin_token: str, bindings: int) -> str:
    """RBAC noise and a ServiceAccount allowed to get the ConfigMap, set up with the admin token; returns the
    ServiceAccount's token."""
    call(conn, "POST", "/api/v1/namespaces", admin_token, {"metadata": {"name": "bench"}})
    call(conn, "POST", "/api/v1/namespaces/bench/configmaps", admin_token, {"metadata": {"name": "cm"}})
    call(conn, "POST", "/api/v1/namespaces/bench/serviceaccounts", admin_token, {"metadata": {"name": "shard"}})
    rules = [{"apiGroups": [g], "resources": [f"r{i}"], "verbs": ["get", "list"]} for i, g in
             enumerate(["", "apps", "batch", "core.oam.dev"] * 5)]
    call(conn, "POST", f"{RBAC}/clusterroles", admin_token, {"metadata": {"name": "noise"}, "rules": rules})
    call(conn, "POST", f"{RBAC}/namespaces/bench/roles", admin_token, {"metadata": {"name": "reader"}, "rules": [
        *rules, {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "noise"}
    for i in range(bindings):
        subject = [{"kind": "User", "name": f"user-{i}"}, {"kind": "Group", "name": f"group-{i}"}]
        call(conn, "POST", f"{RBAC}/clusterrolebindings", admin_token,
             {"metadata": {"name": f"noise-{i}"}, "roleRef": ref, "subjects": subject})
        call(conn, "POST", f"{RBAC}/namespaces/bench/rolebindings", admin_token,
             {"metadata": {"name": f"noise-{i}"}, "roleRef": ref, "subjects": subject})
    call(conn, "POST", f"{RBAC}/namespaces/bench/rolebindings", admin_token, {
        "metadata": {"name": "shard"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                   "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "shard", "namespace": "bench"}]})
    answer = call(conn, "POST", "/api/v1/namespaces/bench/serviceaccounts/shard/token", admin_token,
                  {"spec": {"expirationSeconds": 3600}})
    return answer["status"]["token"]


def timed(conn: http.client.HTTPConnection, token: str, count: int) -> float:
    path = "/api/v1/namespaces/bench/configmaps/cm"
    headers = {"Authorization": f"Bearer {token}"}
    start = time.perf_counter()
    for _ in range(count):
        conn.request("GET", path, None, headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"GET as {token[:12]}: {response.status}")
    return (time.perf_counter() - start) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--bindings", type=int, default=200)
    args = parser.parse_args()
    server = start_server()
    try:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        token = setup(conn, server.token, args.bindings)
        admin, sa = [], []
        for _ in range(3):  # interleaved rounds, so drift on a shared machine hits both alike
            admin.append(timed(conn, server.token, args.requests // 3))
            sa.append(timed(conn, token, args.requests // 3))
        result = {"requests_each": args.requests, "bindings": 2 * args.bindings + 1,
                  "admin_get_us": round(min(admin) * 1e6, 1), "service_account_get_us": round(min(sa) * 1e6, 1),
                  "rbac_over_masters_ratio": round(min(sa) / min(admin), 3)}
        print(json.dumps(result, indent=2))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
