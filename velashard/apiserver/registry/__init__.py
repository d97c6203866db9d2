"""The REST verbs over storage (create, get, list, update, patch, delete) with admission and each kind's
strategy (defaults, status handling, validation), and the scale subresource."""
