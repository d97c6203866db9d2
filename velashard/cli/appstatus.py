"""What `velashard status` prints, as `vela status` prints it: pure functions from the app, its tracker and its
Services and Ingresses to text (the About table, the workflow, the services, the resource tree, the endpoints)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from velashard.apis import labels

SUCCEED, FAIL = "✅", "❌"


def go_time(stamp: str | None) -> str:
    """A creationTimestamp as Go's time.Time prints it: 2026-01-02 15:04:05 +0000 UTC."""
    try:
        return datetime.strptime((stamp or "")[:19], "%Y-%m-%dT%H:%M:%S").strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
    except ValueError:
        return stamp or ""


def table(rows: list[tuple[str, ...]], separator: str = "\t") -> str:
    """Columns padded to their widest cell and joined by `separator`, as gosuri/uitable lays them out."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(separator.join(c.ljust(w) if i < len(r) - 1 else c for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)


def healthy(app: dict[str, Any]) -> bool:
    return all(s.get("healthy") and all(t.get("healthy") for t in s.get("traits") or [])
               for s in (app.get("status") or {}).get("services") or [])


def about(app: dict[str, Any]) -> str:
    meta, status = app["metadata"], app.get("status") or {}
    notes = meta.get("annotations") or {}
    rows = [("  Name:", meta["name"]), ("  Namespace:", meta["namespace"]),
            ("  Created at:", go_time(meta.get("creationTimestamp"))),
            ("  Healthy:", SUCCEED if healthy(app) else FAIL), ("  Details:", status.get("status") or ""),
            # velashard's own: where the app runs and whom it acts as
            ("  Shard:", (meta.get("labels") or {}).get(labels.SCHEDULED_SHARD_ID) or "(unscheduled)"),
            ("  Author:", notes.get(labels.APP_USERNAME) or "-")]
    return "About:\n\n" + table(rows) + "\n\n"


def workflow(app: dict[str, Any]) -> str:
    wf = (app.get("status") or {}).get("workflow")
    if not wf:
        return ""
    out = ["Workflow:\n", f"  mode: {wf.get('mode', '')}", f"  finished: {str(bool(wf.get('finished'))).lower()}",
           f"  Suspend: {str(bool(wf.get('suspend'))).lower()}",
           f"  Terminated: {str(bool(wf.get('terminated'))).lower()}", "  Steps"]

    def step(indent: str, s: dict[str, Any]) -> None:
        out.append(f"{indent[:-2]}- id: {s.get('id', '')}")
        out.extend([f"{indent}name: {s.get('name', '')}", f"{indent}type: {s.get('type', '')}",
                    f"{indent}phase: {s.get('phase', '')} "])
        if s.get("message"):
            out.append(f"    message: {s['message']}")
    for s in wf.get("steps") or []:
        step("    ", s)
        for sub in s.get("subSteps") or []:
            step("      ", sub)
    return "\n".join(out) + "\n\n"


def services(app: dict[str, Any], types: dict[str, str]) -> str:
    svcs = (app.get("status") or {}).get("services") or []
    out = ["Services:\n"] if svcs else []
    for c in svcs:
        out.append(f"  - Name: {c.get('name', '')}  " + (f"Env: {c['env']}" if c.get("env") else ""))
        out.append(f"    Cluster: {c.get('cluster') or 'local'}")
        if c.get("namespace"):
            out.append(f"    Namespace: {c['namespace']}")
        out.append(f"    Type: {types.get(c.get('name', ''), 'unknown')}")
        out.append(f"    Health: {SUCCEED if c.get('healthy') else FAIL}")
        if c.get("message"):
            out.append(f"      Message: {c['message']}")
        out.append("    Traits:" if c.get("traits") else "    No trait applied")
        for t in c.get("traits") or []:
            out.append(f"      Type: {t.get('type', '')}")
            out.append(f"      Health: {SUCCEED if t.get('healthy') else FAIL}")
            if t.get("message"):
                out.append(f"        Message: {t['message']}")
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def _box(up: bool, down: bool, left: bool, right: bool) -> str:
    """A tree connector one cell wide with a cell of padding each side, as `vela status --tree` draws it."""
    chars = {(1, 1, 1, 1): "┼", (1, 1, 1, 0): "┤", (1, 1, 0, 1): "├", (1, 1, 0, 0): "│", (1, 0, 1, 1): "┴",
             (1, 0, 1, 0): "┘", (1, 0, 0, 1): "└", (1, 0, 0, 0): "╵", (0, 1, 1, 1): "┬", (0, 1, 1, 0): "┐",
             (0, 1, 0, 1): "┌", (0, 1, 0, 0): "╷", (0, 0, 1, 1): "─", (0, 0, 1, 0): "╴", (0, 0, 0, 1): "╶"}
    c = chars.get((int(up), int(down), int(left), int(right)), " ")
    return ("─" if left else " ") + c + ("─" if right else " ")


def tree(tracker: dict[str, Any] | None) -> str:
    """The app's resources from its ResourceTracker by cluster and namespace (`vela status --tree`)."""
    refs = [r for r in ((tracker or {}).get("spec") or {}).get("managedResources") or [] if not r.get("deleted")]

    def group(ref: dict[str, Any]) -> str:
        api = ref.get("apiVersion", "")
        return api.split("/")[0] if "/" in api else ""
    refs.sort(key=lambda r: (r.get("cluster") or "local", r.get("namespace") or "",
                             "/".join((group(r), r.get("kind", ""), r.get("cluster") or "local",
                                       r.get("namespace") or "", r.get("name", "")))))
    rows = []
    for i, ref in enumerate(refs):
        row = {"cluster": ref.get("cluster") or "local", "ns": ref.get("namespace") or "-",
               "name": f"{ref.get('kind', '')}/{ref.get('name', '')}", "status": "updated",
               "cu": False, "cd": False, "nu": False, "nd": False}
        row["show_cluster"], row["show_ns"] = row["cluster"], row["ns"]
        if i and row["cluster"] == rows[-1]["cluster"]:
            row["cu"] = rows[-1]["cd"] = True
            row["show_cluster"] = ""
            if row["ns"] == rows[-1]["ns"]:
                row["nu"] = rows[-1]["nd"] = True
                row["show_ns"] = ""
        rows.append(row)
    # Within one namespace the cluster's line does not run down beside the namespace's.
    for i in range(len(rows), 0, -1):
        if i == len(rows) or rows[i]["show_cluster"]:
            for j in range(i - 1, 0, -1):
                if rows[j]["show_cluster"] or rows[j]["show_ns"]:
                    break
                rows[j]["cu"] = rows[j - 1]["cd"] = False
                if j + 1 < len(rows):
                    rows[j + 1]["cu"] = rows[j]["cd"] = False
    widths = [10, 10, 10, 10]
    for row in rows:
        for k, key in enumerate(("show_cluster", "show_ns", "name", "status")):
            widths[k] = max(widths[k], len(row[key]) + 1)
    widths[0] += 4
    widths[1] += 4

    def pad(head: str, tail: str, width: int) -> str:
        return head + " " * max(0, width - len(head) - len(tail)) + tail
    lines = ["".join(pad(h, "", w) for h, w in zip(("CLUSTER", "NAMESPACE", "RESOURCE", "STATUS"), widths))]
    for row in rows:
        lines.append(pad(row["show_cluster"], _box(row["cu"], row["cd"], row["show_cluster"] != "",
                                                   row["show_ns"] != "") + " ", widths[0]) +
                     pad(row["show_ns"], _box(row["nu"], row["nd"], row["show_ns"] != "", True) + " ", widths[1]) +
                     pad(row["name"], "", widths[2]) + pad(row["status"], "", widths[3]))
    return "\n".join(lines) + "\n"


def endpoints(app: dict[str, Any], objects: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """(cluster, component, Kind/namespace/name, URL, inner) for the app's Services and Ingresses."""
    out = []
    for obj in objects:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        component = (meta.get("labels") or {}).get(labels.APP_COMPONENT) or "-"
        ref = f'{obj["kind"]}/{meta.get("namespace", "")}/{meta["name"]}'
        if obj["kind"] == "Service":
            ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
            outside = spec.get("type") == "LoadBalancer" and ingress
            host = (ingress[0].get("ip") or ingress[0].get("hostname")) if outside else \
                f'{meta["name"]}.{meta.get("namespace", "default")}'
            for port in spec.get("ports") or []:
                protocol = (port.get("appProtocol") or ("http" if port.get("port") in (80, 8080) else "tcp")).lower()
                out.append(("local", component, ref, _url(protocol, host, port.get("port") or 0, ""),
                            "false" if outside else "true"))
        elif obj["kind"] == "Ingress":
            tls = bool(spec.get("tls"))
            for rule in spec.get("rules") or []:
                for path in ((rule.get("http") or {}).get("paths") or [{"path": "/"}]):
                    out.append(("local", component, ref, _url("https" if tls else "http", rule.get("host") or "-",
                                                              443 if tls else 80, path.get("path") or ""), "false"))
    return out


def _url(protocol: str, host: str, port: int, path: str) -> str:
    """An endpoint as KubeVela writes it: the default port of http and https left out, tcp without a scheme."""
    path = "" if path == "/" else path
    if (protocol, port) in (("https", 443), ("http", 80)):
        return f"{protocol}://{host}{path}"
    if protocol == "tcp":
        return f"{host}:{port}{path}"
    return f"{protocol}://{host}:{port}{path}"


def boxed(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A bordered table with upper-case centred headers, as olekukonko/tablewriter draws one."""
    heads = [h.upper() for h in header]
    widths = [max(len(x) for x in col) for col in zip(heads, *rows)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule, "|" + "|".join(f" {h.center(w)} " for h, w in zip(heads, widths)) + "|", rule]
    lines += ["|" + "|".join(f" {c.ljust(w)} " for c, w in zip(r, widths)) + "|" for r in rows]
    return "\n".join(lines + [rule]) + "\n"
