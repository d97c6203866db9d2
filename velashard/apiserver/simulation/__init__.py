"""KWOK-style simulation (`--simulate-workloads`): nodes and their heartbeats, pods scheduled and running,
workload status, and the status other controllers would write (ingress, volumes, load balancers)."""
