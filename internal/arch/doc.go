// Package arch holds no code: its test enforces the layering of ARCHITECTURE.md ("Layers"):
// each internal package imports only packages of lower layers, and Pebble is imported only by
// internal/storage.
package arch
