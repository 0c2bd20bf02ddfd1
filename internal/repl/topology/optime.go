package topology

import (
	"time"

	"humongo/internal/optime"
)

// lagSecs returns how many seconds of oplog a is behind b (0 if not behind).
func lagSecs(a, b optime.OpTime) time.Duration {
	if a.TS.Secs() >= b.TS.Secs() {
		return 0
	}
	return time.Duration(b.TS.Secs()-a.TS.Secs()) * time.Second
}

// MemberState is a replica-set member state; the numeric values are MongoDB's
// wire codes (replSetGetStatus "state").
type MemberState int

const (
	StateStartup    MemberState = 0
	StatePrimary    MemberState = 1
	StateSecondary  MemberState = 2
	StateRecovering MemberState = 3
	StateStartup2   MemberState = 5
	StateUnknown    MemberState = 6
	StateArbiter    MemberState = 7
	StateDown       MemberState = 8
	StateRollback   MemberState = 9
	StateRemoved    MemberState = 10
)

func (s MemberState) String() string {
	switch s {
	case StateStartup:
		return "STARTUP"
	case StatePrimary:
		return "PRIMARY"
	case StateSecondary:
		return "SECONDARY"
	case StateRecovering:
		return "RECOVERING"
	case StateStartup2:
		return "STARTUP2"
	case StateArbiter:
		return "ARBITER"
	case StateDown:
		return "DOWN"
	case StateRollback:
		return "ROLLBACK"
	case StateRemoved:
		return "REMOVED"
	}
	return "UNKNOWN"
}

// readable reports whether a member in state s can serve as a sync source.
func (s MemberState) readable() bool { return s == StatePrimary || s == StateSecondary }
