// Package arch holds no code: its tests enforce the layering of ARCHITECTURE.md ("Layers") as
// docs/architecture.md lists it: each production package under internal/ imports only
// packages of lower layers, no production package imports a test-only harness, the front end
// stays role-neutral, Pebble is imported only by internal/storage, and the document's tables
// match the ranks.
package arch
