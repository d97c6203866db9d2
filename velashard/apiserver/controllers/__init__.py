"""kube-controller-manager's loops for the embedded server: garbage collection, namespace termination, CRD
lifecycle, the Deployment controller's ReplicaSet bookkeeping."""
