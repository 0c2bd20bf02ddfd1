//go:build race

package lock

// raceEnabled sizes heavy tests: the race detector slows lock traffic down ~50×.
const raceEnabled = true
