"""`velashard dev`: a whole sharded velashard on one machine (the embedded API server, the chart installed by
real Helm, a local kubelet running its pods as processes), with a live view. Only `velashard/cli/dev.py`
imports this package."""
