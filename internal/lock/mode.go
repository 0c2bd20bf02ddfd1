package lock

// Mode is a lock mode.
type Mode uint8

// Lock modes, weakest first.
const (
	ModeNone Mode = iota
	ModeIS        // intent shared: S locks are taken below
	ModeIX        // intent exclusive: X locks are taken below
	ModeS         // shared
	ModeX         // exclusive
	numModes
)

func (m Mode) String() string {
	switch m {
	case ModeNone:
		return "NONE"
	case ModeIS:
		return "IS"
	case ModeIX:
		return "IX"
	case ModeS:
		return "S"
	case ModeX:
		return "X"
	}
	return "INVALID"
}

// modeMask is the bit of m in a set of modes.
func modeMask(m Mode) uint8 { return 1 << m }

// conflictTable[m] is the set of granted modes a request in mode m conflicts with. It encodes
// the spec's compatibility matrix:
//
//	requested \ granted  NONE IS IX  S  X
//	IS                     Y   Y  Y  Y  N
//	IX                     Y   Y  Y  N  N
//	S                      Y   Y  N  Y  N
//	X                      Y   N  N  N  N
var conflictTable = [numModes]uint8{
	ModeNone: 0,
	ModeIS:   1 << ModeX,
	ModeIX:   1<<ModeS | 1<<ModeX,
	ModeS:    1<<ModeIX | 1<<ModeX,
	ModeX:    1<<ModeIS | 1<<ModeIX | 1<<ModeS | 1<<ModeX,
}

// conflicts reports whether mode m conflicts with any mode in the set mask.
func conflicts(m Mode, mask uint8) bool { return conflictTable[m]&mask != 0 }

// Compatible reports whether a request in mode requested can be granted while granted is held
// by someone else.
func Compatible(requested, granted Mode) bool {
	return !conflicts(requested, modeMask(granted))
}

// covers reports whether holding mode have gives every right of mode want: a mode covers
// another when it conflicts with at least everything the other conflicts with.
func covers(have, want Mode) bool {
	return conflictTable[have]|conflictTable[want] == conflictTable[have]
}

// supremum is the weakest mode covering both a and b (IX and S meet only at X).
func supremum(a, b Mode) Mode {
	for m := ModeIS; m < numModes; m++ {
		if covers(m, a) && covers(m, b) {
			return m
		}
	}
	return ModeX
}

// intentMode is the mode a parent must cover for a child lock in mode m: IS for reads, IX for
// writes.
func intentMode(m Mode) Mode {
	if m == ModeIS || m == ModeS {
		return ModeIS
	}
	return ModeIX
}

func validMode(m Mode) bool { return m >= ModeIS && m < numModes }
