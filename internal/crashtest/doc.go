// Package crashtest holds the storage engine's kill -9 test (execution spec: "Journaling",
// "Startup Recovery"): a child process writes through the whole stack (storage, catalog, index
// write path), acknowledging each write only after WaitUntilDurable; the parent kills it with
// SIGKILL at a random instant, reopens the data directory, validates the collection and checks
// that every acknowledged write is present.
package crashtest
