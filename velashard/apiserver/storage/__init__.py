"""Objects at rest: the store (one resourceVersion, watch fan-out), label and field selectors, the resource
types served, object validation, managedFields and server-side apply, version conversion, CRD structural
schemas."""
