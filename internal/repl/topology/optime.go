package topology

import (
	"fmt"
	"time"
)

// Timestamp is a BSON timestamp: seconds since the epoch and an increment
// that orders events within one second.
type Timestamp struct {
	Secs uint32
	Inc  uint32
}

// Compare orders timestamps by seconds then increment.
func (t Timestamp) Compare(o Timestamp) int {
	switch {
	case t.Secs < o.Secs:
		return -1
	case t.Secs > o.Secs:
		return 1
	case t.Inc < o.Inc:
		return -1
	case t.Inc > o.Inc:
		return 1
	}
	return 0
}

// OpTime identifies an oplog entry: its timestamp and the term of the primary
// that wrote it. OpTimes compare by term first, then timestamp (MongoDB's
// OpTime::operator<), which is what makes "more up to date" well defined
// across divergent branches of history.
type OpTime struct {
	TS   Timestamp
	Term int64
}

// Compare returns -1, 0 or +1.
func (o OpTime) Compare(p OpTime) int {
	switch {
	case o.Term < p.Term:
		return -1
	case o.Term > p.Term:
		return 1
	}
	return o.TS.Compare(p.TS)
}

// Less reports o < p.
func (o OpTime) Less(p OpTime) bool { return o.Compare(p) < 0 }

// IsNull reports whether o is the zero OpTime (no entry).
func (o OpTime) IsNull() bool { return o == OpTime{} }

func (o OpTime) String() string {
	return fmt.Sprintf("{%d|%d t%d}", o.TS.Secs, o.TS.Inc, o.Term)
}

// MaxOpTime returns the larger of a and b.
func MaxOpTime(a, b OpTime) OpTime {
	if a.Less(b) {
		return b
	}
	return a
}

// MinOpTime returns the smaller of a and b.
func MinOpTime(a, b OpTime) OpTime {
	if b.Less(a) {
		return b
	}
	return a
}

// lagSecs returns how many seconds of oplog a is behind b (0 if not behind).
func lagSecs(a, b OpTime) time.Duration {
	if a.TS.Secs >= b.TS.Secs {
		return 0
	}
	return time.Duration(b.TS.Secs-a.TS.Secs) * time.Second
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
