"""The dashboard's Flask routes: pages rendered on the server with Jinja2, fragments that htmx reloads when the
live stream says their data changed, confirmations and actions. Served on 127.0.0.1 only; every request must
name this host (a page elsewhere cannot reach it through DNS rebinding) and every action carries this process's
token (nor through a cross-site form)."""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit

from flask import Flask, Response, abort, render_template, request
from werkzeug.serving import make_server

from velashard.apis import labels
from velashard.apis.oam import APPLICATION_REVISIONS, RESOURCE_TRACKERS
from velashard.core.tracker import tracker_name
from velashard.dashboard import actions
from velashard.dashboard.appsview import Filters, page_of
from velashard.dashboard.appview import app_view
from velashard.dashboard.fleet import attention, cards
from velashard.dashboard.moves import episodes, last_moves, move_of, others
from velashard.dashboard.rows import parse_time
from velashard.dashboard.sources import Sources
from velashard.kube import errors
from velashard.kube.client import KubeClient
from velashard.kube.discovery import Discovery

TREE_TTL = 2.0  # an app page's tree is read at most this often, however often its data changes
FLEET_TTL = 1.0  # the fleet's model is made at most this often: pages change with a debounce of 0.5 s anyway


def _age(stamp: str, now: Any) -> str:
    then = parse_time(stamp)
    if not then:
        return "-"
    seconds = int((now - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(0, seconds)}s"


class Dashboard:
    def __init__(self, client: KubeClient, sources: Sources, stuck_after: float = 300.0):
        self.client, self.sources, self.stuck_after = client, sources, stuck_after
        self.token = secrets.token_urlsafe(24)
        self.discovery = Discovery(client)
        self._trees: dict[str, tuple[float, Any]] = {}
        self._trees_lock = threading.Lock()
        self._fleet: tuple[float, dict[str, Any]] = (-FLEET_TTL, {})
        self.allowed_hosts: set[str] = set()
        self.app = self._flask()

    # --- view data ---------------------------------------------------------------------------------

    def fleet(self) -> dict[str, Any]:
        with self._trees_lock:
            made, model = self._fleet
        if time.monotonic() - made < FLEET_TTL:
            return model
        model = self._make_fleet()
        with self._trees_lock:
            self._fleet = (time.monotonic(), model)
        return model

    def _make_fleet(self) -> dict[str, Any]:
        members, pods, leases = self.sources.fleet_data()
        rows, now = self.sources.rows(), self.sources.now()
        needing, total = attention(rows, members, now, self.stuck_after)
        return {"cards": cards(rows, members, pods, leases, last_moves(self.sources.moves()), now),
                "attention": needing, "attention_total": total, "apps": len(rows), "membership": members is not None,
                "episodes": episodes(self.sources.moves(), self.sources.reconciled())[:3]}

    def moves(self) -> dict[str, Any]:
        moves = self.sources.moves()
        return {"episodes": episodes(moves, self.sources.reconciled()), "others": others(moves)}

    def _tree(self, namespace: str, name: str, app: dict[str, Any]) -> tuple[Any, dict, str, list]:
        """The app's tracker, its objects and its revisions, read as the user (at most every TREE_TTL seconds)."""
        key = f"{namespace}/{name}"
        with self._trees_lock:
            cached = self._trees.get(key)
        if cached and time.monotonic() - cached[0] < TREE_TTL:
            return cached[1]
        tracker, live, note, revisions = None, {}, "", []
        try:
            tracker = self.client.get(RESOURCE_TRACKERS, tracker_name(app))
        except errors.NotFound:
            note = "no ResourceTracker yet"
        except errors.KubeError as err:
            note = f"the ResourceTracker cannot be read: {err}"
        for ref in (tracker or {}).get("spec", {}).get("managedResources") or []:
            if ref.get("deleted"):
                continue
            ref_key = (ref.get("kind", ""), ref.get("namespace", ""), ref.get("name", ""))
            try:
                res = self.discovery.for_kind(ref.get("apiVersion", ""), ref_key[0])
                live[ref_key] = self.client.get(res, ref_key[2], ref_key[1] or None)
            except errors.NotFound:
                live[ref_key] = None
            except errors.KubeError as err:
                live[ref_key] = f"cannot read: {err}"
        try:
            revisions = self.client.list(APPLICATION_REVISIONS, namespace,
                                         label_selector=f"{labels.APP_NAME}={name}")["items"]
        except errors.KubeError:
            pass
        result = (tracker, live, note, revisions)
        with self._trees_lock:
            if len(self._trees) > 256:
                self._trees.clear()
            self._trees[key] = (time.monotonic(), result)
        return result

    def app_page(self, namespace: str, name: str) -> Any:
        app = self.sources.app(namespace, name)
        if app is None:
            return None
        tracker, live, note, revisions = self._tree(namespace, name, app)
        events = self.sources.app_events(namespace, name)
        moves = [m for m in (move_of(e) for e in events) if m is not None]
        return app_view(app, tracker, live, note, events, revisions, moves)

    # --- Flask -------------------------------------------------------------------------------------

    def _flask(self) -> Flask:
        app = Flask(__name__)
        app.jinja_env.globals.update(age=_age, now=self.sources.now)
        app.jinja_env.trim_blocks = app.jinja_env.lstrip_blocks = True

        @app.before_request
        def same_host() -> None:
            if self.allowed_hosts and request.host not in self.allowed_hosts:
                abort(421)  # a rebound DNS name: not for us
            if request.method == "POST":
                origin = request.headers.get("Origin")
                if request.form.get("token") != self.token or (origin and origin.split("://", 1)[-1]
                                                                not in self.allowed_hosts | {request.host}):
                    abort(403)

        @app.after_request
        def headers(response: Response) -> Response:
            response.headers.setdefault("X-Frame-Options", "DENY")
            response.headers.setdefault("Content-Security-Policy", "default-src 'self'; style-src 'self'; "
                                                                   "frame-ancestors 'none'")
            response.headers.setdefault("Referrer-Policy", "same-origin")  # no-referrer would make forms send Origin: null
            return response

        def page(template: str, fragment: bool, **data: Any) -> str:
            return render_template(f"_{template}" if fragment else template, fragment=fragment, **data)

        @app.get("/")
        @app.get("/fragment/fleet")
        def fleet() -> str:
            return page("fleet.html", request.path.startswith("/fragment"), **self.fleet())

        @app.get("/apps")
        @app.get("/fragment/apps")
        def apps() -> str:
            args: Any = request.args
            if not args and request.headers.get("HX-Current-URL"):
                # a live reload: the filters are those of the page the browser shows
                args = dict(parse_qsl(urlsplit(request.headers["HX-Current-URL"]).query))
            filters = Filters.from_args(args)
            return page("apps.html", request.path.startswith("/fragment"), filters=filters,
                        page=page_of(self.sources.rows(), filters))

        @app.get("/moves")
        @app.get("/fragment/moves")
        def moves() -> str:
            return page("moves.html", request.path.startswith("/fragment"), **self.moves())

        @app.get("/app/<namespace>/<name>")
        @app.get("/fragment/app/<namespace>/<name>")
        def one_app(namespace: str, name: str) -> Any:
            view = self.app_page(namespace, name)
            if view is None:
                return render_template("missing.html", namespace=namespace, name=name), 404
            return page("app.html", request.path.startswith("/fragment"), view=view, token=self.token)

        @app.get("/app/<namespace>/<name>/confirm")
        def confirm(namespace: str, name: str) -> Any:
            action = request.args.get("action", "")
            if action not in actions.ACTIONS or self.sources.app(namespace, name) is None:
                abort(404)
            shards = sorted({c.shard for c in cards(self.sources.rows(), *self.sources.fleet_data(), {},
                                                    self.sources.now())
                             if c.status == "available" and c.shard != labels.MASTER_SHARD_ID})
            return render_template("confirm.html", namespace=namespace, name=name, action=action,
                                   label=actions.ACTIONS[action], token=self.token, shards=shards)

        @app.post("/app/<namespace>/<name>/action")
        def act(namespace: str, name: str) -> Any:
            action = request.form.get("action", "")
            try:
                done, ok = actions.run(self.client, namespace, name, action, request.form.get("shard", ""),
                                       self.sources.controller_namespace), True
            except actions.ActionError as err:
                done, ok = str(err), False
            with self._trees_lock:
                self._trees.pop(f"{namespace}/{name}", None)
            return render_template("result.html", namespace=namespace, name=name, action=action, message=done,
                                   ok=ok), 200 if ok else 403

        @app.get("/stream")
        def stream() -> Response:
            topics = [t for t in request.args.get("topics", "").split(",") if t in ("fleet", "apps", "moves")]
            return Response(self.sources.hub.stream(topics, request.args.get("app", "")),
                            mimetype="text/event-stream", headers={"Cache-Control": "no-cache"})

        @app.get("/healthz")
        def healthz() -> tuple[str, int]:
            return ("ok\n", 200) if self.sources.synced() else ("syncing\n", 503)

        return app

    def serve(self, port: int, ready: Callable[[str], None] | None = None,
              stop: threading.Event | None = None) -> None:
        """Serve on 127.0.0.1:`port` (0: a free one) until `stop` is set; `ready` hears the URL."""
        server = make_server("127.0.0.1", port, self.app, threaded=True)
        bound = server.server_port
        self.allowed_hosts = {f"127.0.0.1:{bound}", f"localhost:{bound}"}
        thread = threading.Thread(target=server.serve_forever, name="dashboard-http", daemon=True)
        thread.start()
        if ready is not None:
            ready(f"http://127.0.0.1:{bound}/")
        try:
            (stop or threading.Event()).wait()
        finally:
            server.shutdown()
