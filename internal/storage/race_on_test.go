//go:build race

package storage

// raceEnabled: allocation counts are meaningless under the race detector (sync.Pool drops
// items at random).
const raceEnabled = true
