"""A local pod's volumes, each a directory on this machine, kept as a kubelet keeps them.

Secret volumes: each key of the Secret is a file; a new version is written into a fresh hidden directory and made
current by renaming one symlink (`..data`), so that a reader sees all the old files or all the new ones, never a
mix: the files cert-manager's certificates reach a pod through, rotated in place.

emptyDir volumes: a directory of the pod's own, made empty when the pod is created, kept while the pod lives (its
container's restarts included) and removed with the pod: where a controller keeps its cache snapshot
(`--cache-dir`).
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


@dataclass
class EmptyDirVolume:
    """An emptyDir. `medium: Memory` is accepted and is a directory on disk here (dev has no tmpfs of its own);
    `sizeLimit` is accepted and not enforced (a kubelet evicts the pod once the volume outgrows it)."""
    name: str
    mount_path: str
    directory: str  # where it is on this machine

    def create(self) -> None:
        """Empty, as a new pod's: whatever a former pod of the same name left there goes. Only the local user
        may enter it: a kubelet makes it writable by all, for any runAsUser, but here every pod runs as that user."""
        shutil.rmtree(self.directory, ignore_errors=True)
        os.makedirs(self.directory, mode=0o700)


Volume = SecretVolume | EmptyDirVolume


def pod_volumes(pod_spec: dict[str, Any], container: dict[str, Any], root: str) -> list[Volume]:
    """The container's mounts of the pod's Secret and emptyDir volumes, each a directory under `root`; mounts of
    other kinds of volume are left out."""
    sources = {v.get("name"): v for v in pod_spec.get("volumes") or []}
    out: list[Volume] = []
    for mount in container.get("volumeMounts") or []:
        source, path = sources.get(mount.get("name")) or {}, (mount.get("mountPath") or "").rstrip("/") or "/"
        if not mount.get("mountPath"):
            continue
        directory = os.path.join(root, mount["name"])
        secret = source.get("secret")
        if secret and secret.get("secretName"):
            out.append(SecretVolume(mount["name"], secret["secretName"], path, directory, bool(secret.get("optional"))))
        elif isinstance(source.get("emptyDir"), dict):
            out.append(EmptyDirVolume(mount["name"], path, directory))
    return out


def local_args(args: list[str], volumes: list[Volume]) -> list[str]:
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
