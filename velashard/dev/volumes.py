"""A local pod's Secret volumes, projected into a directory the way a kubelet does it.

Each key of the Secret is a file; a new version is written into a fresh hidden directory and made current by
renaming one symlink (`..data`), so that a reader sees all the old files or all the new ones, never a mix: the
files cert-manager's certificates reach a pod through, rotated in place.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

DATA = "..data"


@dataclass
class SecretVolume:
    name: str
    secret: str
    mount_path: str
    directory: str  # where it is projected on this machine
    optional: bool = False
    projected: str | None = None  # the Secret's resourceVersion last written

    def sync(self, secret: dict[str, Any] | None) -> bool:
        """Write the Secret's current data if it changed; whether the volume is there for the pod to start."""
        if secret is None:
            if self.optional and self.projected is None:
                project(self.directory, {})
                self.projected = ""
            return self.projected is not None
        version = secret["metadata"].get("resourceVersion", "")
        if version != self.projected:
            files = {}
            for key, value in (secret.get("data") or {}).items():
                try:
                    files[key] = base64.b64decode(value)
                except (binascii.Error, ValueError):
                    continue
            project(self.directory, files)
            self.projected = version
        return True


def secret_volumes(pod_spec: dict[str, Any], container: dict[str, Any], root: str) -> list[SecretVolume]:
    """The container's mounts of the pod's Secret volumes, each projected under `root`."""
    volumes = {v.get("name"): v.get("secret") for v in pod_spec.get("volumes") or [] if v.get("secret")}
    out = []
    for mount in container.get("volumeMounts") or []:
        source = volumes.get(mount.get("name"))
        if source and source.get("secretName") and mount.get("mountPath"):
            out.append(SecretVolume(mount["name"], source["secretName"], mount["mountPath"].rstrip("/") or "/",
                                    os.path.join(root, mount["name"]), bool(source.get("optional"))))
    return out


def local_args(args: list[str], volumes: list[SecretVolume]) -> list[str]:
    """Container arguments naming a mount path (`--webhook-cert-dir=/etc/k8s-webhook-certs`) with the directory it
    is projected into instead."""
    out = []
    for arg in args:
        for volume in sorted(volumes, key=lambda v: -len(v.mount_path)):
            flag, sep, value = arg.partition("=")
            if sep and (value == volume.mount_path or value.startswith(volume.mount_path + "/")):
                arg = flag + "=" + volume.directory + value[len(volume.mount_path):]
                break
        out.append(arg)
    return out


def project(directory: str, files: dict[str, bytes]) -> None:
    """Make `files` the directory's content in one step (a kubelet's atomic writer)."""
    os.makedirs(directory, exist_ok=True)
    version = os.path.join(directory, f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}")
    os.makedirs(version)
    for key, data in files.items():
        with open(os.path.join(version, key), "wb") as fh:
            fh.write(data)
    data_link = os.path.join(directory, DATA)
    previous = os.readlink(data_link) if os.path.islink(data_link) else None
    tmp = os.path.join(directory, DATA + "_tmp")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.basename(version), tmp)
    os.replace(tmp, data_link)
    for key in files:
        link = os.path.join(directory, key)
        if not os.path.lexists(link):
            os.symlink(os.path.join(DATA, key), link)
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        if not entry.startswith("..") and entry not in files and os.path.islink(path):
            os.unlink(path)
    if previous is not None:
        shutil.rmtree(os.path.join(directory, previous), ignore_errors=True)
