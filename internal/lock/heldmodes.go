package lock

// HeldMode is one lock type an operation holds and the strongest mode it holds it in, as
// currentOp's "locks" shows it ({Global: "w", Database: "w", Collection: "w"}).
type HeldMode struct {
	Name string // serverStatus.locks section name: "Global", "Database", ...
	Mode Mode
}

// raiseHeld records that a lock of category c is now held in mode (a grant or a conversion).
// The owner keeps a plain copy so the atomic is only written when the strongest mode changes.
func (l *Locker) raiseHeld(c statCategory, mode Mode) {
	if m := supremum(l.heldShadow[c], mode); m != l.heldShadow[c] {
		l.heldShadow[c] = m
		l.heldModes[c].Store(uint32(m))
	}
}

// recomputeHeld recomputes category c's strongest held mode after a release or downgrade.
func (l *Locker) recomputeHeld(c statCategory) {
	m := ModeNone
	for _, r := range l.held {
		if r.res.statCategory() == c {
			m = supremum(m, r.mode)
		}
	}
	if m != l.heldShadow[c] {
		l.heldShadow[c] = m
		l.heldModes[c].Store(uint32(m))
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
