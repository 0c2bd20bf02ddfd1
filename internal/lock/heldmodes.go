package lock

// HeldMode is one lock type an operation holds and the strongest mode it holds it in, as
// currentOp's "locks" shows it ({Global: "w", Database: "w", Collection: "w"}).
type HeldMode struct {
	Name string // serverStatus.locks section name: "Global", "Database", ...
	Mode Mode
}

// publishHeld recomputes, from the held requests, the strongest mode held per lock type and
// stores it where HeldModes can read it from another goroutine. Called by the owner whenever
// its held set or a held mode changes.
func (l *Locker) publishHeld() {
	var modes [numStatCategories]Mode
	for _, r := range l.held {
		c := r.res.statCategory()
		modes[c] = supremum(modes[c], r.mode)
	}
	for c := range modes {
		if Mode(l.heldModes[c].Load()) != modes[c] {
			l.heldModes[c].Store(uint32(modes[c]))
		}
	}
}

// HeldModes returns the lock types held and their strongest modes, in serverStatus.locks
// order. Unlike the rest of Locker, it may be called from any goroutine (currentOp).
func (l *Locker) HeldModes() []HeldMode {
	var out []HeldMode
	for c := range l.heldModes {
		if m := Mode(l.heldModes[c].Load()); m != ModeNone {
			out = append(out, HeldMode{Name: statCategoryNames[c], Mode: m})
		}
	}
	return out
}
