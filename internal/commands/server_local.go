package commands

import (
	"sync"
	"sync/atomic"

	"humongo/internal/cursor"
)

// serverLocal is the command layer's per-server state (State.local). It used to live in
// package-level maps keyed by *State, shared by every server of a test process and never
// released; now each server owns its own and drops it with its State. Its zero value is ready:
// the parts that need the State to be built are built on first use by their accessors.
type serverLocal struct {
	// cursors is the cursor manager (cursorManager); CloseCursors closes it at shutdown.
	cursorsOnce sync.Once
	cursors     *cursor.Manager

	// notifier wakes awaitData getMores on capped collections (findNotifierFor).
	notifier findNotifier
	// awaitStats counts how empty awaitData getMores ended (AwaitStats).
	awaitStats AwaitDataStats

	// clusterTime is the gossiped cluster time (storage.Timestamp encoding).
	clusterTime atomic.Uint64

	// rwDefaults are the default read and write concerns (rwDefaultsFor).
	rwDefaultsOnce sync.Once
	rwDefaults     *rwDefaults
}
