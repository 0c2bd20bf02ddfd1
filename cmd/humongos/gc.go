package main

import "runtime/debug"

// routerGCPercent is humongos's GOGC when the environment sets none. A router keeps little
// live heap (routing tables, cursors) but allocates a reply's size several times over per
// request (the shards' replies, the merged batch, the reply sent), so with the default 100
// the collector runs every few requests: measured on a scatter-gather find of 100 1 KB
// documents, GC was about a third of the router's CPU, and GOGC 400 cut its CPU per request
// by 40 % (docs/benchmarks.md, issue 12). The server's large-message burst mode still lowers
// GOGC while large messages are in flight and restores this value afterwards.
const routerGCPercent = 400

// setRouterGC applies routerGCPercent unless GOGC is set (an operator's choice wins); it
// returns the GOGC in force.
func setRouterGC(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		prev := debug.SetGCPercent(-1)
		debug.SetGCPercent(prev)
		return prev
	}
	debug.SetGCPercent(routerGCPercent)
	return routerGCPercent
}
