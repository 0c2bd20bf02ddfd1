package commands

import "humongo/internal/operation"

// IndexBuildCoordinator is db's index-build coordinator, as an opaque identity for tests that
// check two nodes do not share one.
func IndexBuildCoordinator(db *operation.DB) any { return indexBuildsOf(db) }

// IndexBuildDrivers lists the builds db's coordinator is driving.
func IndexBuildDrivers(db *operation.DB) []string {
	c := indexBuildsOf(db)
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := range c.drivers {
		out = append(out, id.String())
	}
	return out
}
