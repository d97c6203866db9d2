"""Load generator: create N single-component applications (from several threads), optionally update them.

    python hack/load_apps.py --kubeconfig .velashard/kubeconfig --apps 500 [--namespace load] [--update]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from velashard.apis.oam import APPLICATIONS  # noqa: E402
from velashard.kube import errors  # noqa: E402
from velashard.kube.client import KubeClient  # noqa: E402
from velashard.kube.resources import NAMESPACES  # noqa: E402


def application(name: str, namespace: str, image: str) -> dict:
    return {"apiVersion": "core.oam.dev/v1beta1", "kind": "Application", "metadata": {"name": name,
                                                                                      "namespace": namespace},
            "spec": {"components": [{"name": name, "type": "worker", "properties": {"image": image}}]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", default=".velashard/kubeconfig")
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--namespace", default="load")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--update", action="store_true", help="change the image of existing apps instead")
    args = parser.parse_args()
    client = KubeClient.from_kubeconfig(args.kubeconfig, shard_id="load", component="velashard-load", qps=1000,
                                        burst=1000)
    try:
        client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.namespace}})
    except errors.AlreadyExists:
        pass
    image = f"busybox:{int(time.time())}"

    def work(indices: range) -> None:
        for i in indices:
            name = f"load-{i}"
            if args.update:
                client.patch(APPLICATIONS, name, {"spec": {"components": [
                    application(name, args.namespace, image)["spec"]["components"][0]]}}, args.namespace)
            else:
                try:
                    client.create(APPLICATIONS, application(name, args.namespace, "busybox:1"))
                except errors.AlreadyExists:
                    pass

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(range(t, args.apps, args.threads),)) for t in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{'updated' if args.update else 'created'} {args.apps} applications in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
