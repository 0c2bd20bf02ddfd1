package commands

import "humongo/internal/service"

// CloseCursors kills every cursor the server still holds. The server calls it at shutdown,
// once no operation runs, before it closes the storage engine: an idle cursor keeps a
// storage snapshot and iterators open, and the engine must not close under them.
func CloseCursors(st *service.State) {
	cursorManager(st).Close()
}
