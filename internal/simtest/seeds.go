// Package simtest holds what the deterministic protocol simulations share (ARCHITECTURE.md
// testing tier 3): how many seeds a run covers and how one is replayed.
package simtest

import (
	"os"
	"strconv"
	"testing"
)

// SeedRange is the seeds a simulation runs: HUMONGO_SEED replays one, HUMONGO_SIM_SEEDS
// sets how many (a longer soak), -short runs 200, otherwise n.
func SeedRange(t testing.TB, n uint64) (from, to uint64) {
	t.Helper()
	if s := os.Getenv("HUMONGO_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HUMONGO_SEED=%q: %v", s, err)
		}
		return seed, seed + 1
	}
	if s := os.Getenv("HUMONGO_SIM_SEEDS"); s != "" {
		count, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HUMONGO_SIM_SEEDS=%q: %v", s, err)
		}
		return 0, count
	}
	if testing.Short() {
		return 0, 200
	}
	return 0, n
}
