// Package matchertest runs the update language against the real query matcher
// (internal/query) through the ParseOptions hooks, the way the command layer wires them.
// It is a separate package so that internal/query/update's own tests never depend on the
// matcher compiling.
package matchertest
