"""Admission: webhooks called as kube-apiserver calls them, ValidatingAdmissionPolicy and its CEL."""
