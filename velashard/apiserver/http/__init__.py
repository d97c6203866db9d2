"""The API server over HTTP: routing, discovery, list/watch streaming, tables, protobuf bodies, OpenAPI,
the audit log."""
