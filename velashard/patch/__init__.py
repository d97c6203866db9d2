"""Patch formats Kubernetes uses: JSON merge patch, JSON patch, strategic merge patch, and a three-way merge."""

from velashard.patch.errors import PatchError
from velashard.patch.json_patch import apply_json_patch
from velashard.patch.merge_patch import json_merge_patch
from velashard.patch.strategic_merge import strategic_merge_patch
from velashard.patch.three_way import three_way_merge

__all__ = ["PatchError", "apply_json_patch", "json_merge_patch", "strategic_merge_patch", "three_way_merge"]
