package commands

import (
	"sync"

	"humongo/internal/cursor"
	"humongo/internal/repl/concern"
	"humongo/internal/service"
)

// serverLocal is the command layer's per-server state, a decoration of the server's State
// (see local). It used to live in package-level maps keyed by *service.State, shared by every server
// of a test process and never released; now each server owns its own and drops it with its
// State. Its zero value is ready: the parts that need the State to be built are built on
// first use by their accessors.
type serverLocal struct {
	// cursors is the cursor manager (cursorManager); CloseCursors closes it at shutdown.
	cursorsOnce sync.Once
	cursors     *cursor.Manager

	// notifier wakes awaitData getMores on capped collections (findNotifierFor).
	notifier findNotifier
	// awaitStats counts how empty awaitData getMores ended (AwaitStats).
	awaitStats AwaitDataStats

	// concern is the gossiped cluster time and the default read and write concern.
	concern concern.ServerState
}

// localKey is serverLocal's decoration key on service.State.
type localKey struct{}

// local returns st's command-layer state, built on first use.
func local(st *service.State) *serverLocal {
	return st.Decorate(localKey{}, func() any { return new(serverLocal) }).(*serverLocal)
}
