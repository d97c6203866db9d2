"""velashard: a KubeVela-style application delivery controller that scales out by sharding."""

__version__ = "0.1.0"
