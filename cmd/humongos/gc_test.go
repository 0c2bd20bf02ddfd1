package main

import (
	"runtime/debug"
	"testing"
)

// TestSetRouterGC: without GOGC in the environment humongos runs with routerGCPercent; an
// operator's GOGC is left in force.
func TestSetRouterGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	if got := setRouterGC(func(string) string { return "" }); got != routerGCPercent {
		t.Errorf("setRouterGC without GOGC = %d, want %d", got, routerGCPercent)
	}
	if got := debug.SetGCPercent(100); got != routerGCPercent {
		t.Errorf("GOGC in force %d, want %d", got, routerGCPercent)
	}
	env := map[string]string{"GOGC": "150"}
	if got := setRouterGC(func(k string) string { return env[k] }); got != 100 {
		t.Errorf("setRouterGC with GOGC set = %d, want the runtime's 100 left alone", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC in force %d after an operator's GOGC, want 100", got)
	}
}
