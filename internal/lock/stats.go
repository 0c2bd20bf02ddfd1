package lock

import "sync/atomic"

// statCategory is a section of serverStatus.locks.
type statCategory uint8

const (
	statPBWM statCategory = iota
	statRSTL
	statGlobal
	statDatabase
	statCollection
	statMutex
	numStatCategories
)

// statCategoryNames are MongoDB's serverStatus.locks section names.
var statCategoryNames = [numStatCategories]string{
	statPBWM:       "ParallelBatchWriterMode",
	statRSTL:       "ReplicationStateTransition",
	statGlobal:     "Global",
	statDatabase:   "Database",
	statCollection: "Collection",
	statMutex:      "Mutex",
}

// ModeKey is the field name MongoDB uses for mode m inside acquireCount and friends:
// r (IS), w (IX), R (S), W (X).
func ModeKey(m Mode) string {
	switch m {
	case ModeIS:
		return "r"
	case ModeIX:
		return "w"
	case ModeS:
		return "R"
	case ModeX:
		return "W"
	}
	return ""
}

// ModeStats are the counters of one (category, mode) pair.
type ModeStats struct {
	AcquireCount        int64 // every Lock call, recursive ones included
	AcquireWaitCount    int64 // Lock calls that had to wait
	TimeAcquiringMicros int64 // total time spent waiting
}

// CategoryStats is one section of serverStatus.locks, e.g. "Global" or "Collection".
type CategoryStats struct {
	Name  string
	Modes [numModes]ModeStats // indexed by Mode; ModeNone is always zero
}

// IsZero reports whether no acquisition was counted in c (MongoDB omits such sections).
func (c *CategoryStats) IsZero() bool {
	for _, s := range c.Modes {
		if s != (ModeStats{}) {
			return false
		}
	}
	return true
}

// Stats is a snapshot of lock statistics, in serverStatus.locks order. The server formats it
// as {<Name>: {acquireCount: {r, w, R, W}, acquireWaitCount: {...}, timeAcquiringMicros:
// {...}}}, leaving out zero counters and empty sections, as MongoDB does.
type Stats struct {
	Categories [numStatCategories]CategoryStats
}

// Category returns the section called name ("Global", "Database", ...); zero if unknown.
func (s *Stats) Category(name string) CategoryStats {
	for i := range s.Categories {
		if s.Categories[i].Name == name {
			return s.Categories[i]
		}
	}
	return CategoryStats{}
}

// statCounters are the live counters. Lockers record into one of several stripes (chosen by
// locker id) so that concurrent operations do not all bounce the same cache lines.
type statCounters struct {
	c [numStatCategories][numModes]struct {
		acquire, wait, micros atomic.Int64
	}
	_ [64]byte
}

const numStatStripes = 8

type statStripes [numStatStripes]statCounters

func (s *statStripes) snapshot() Stats {
	var out Stats
	for c := range out.Categories {
		out.Categories[c].Name = statCategoryNames[c]
		for m := range out.Categories[c].Modes {
			var ms ModeStats
			for i := range s {
				ctr := &s[i].c[c][m]
				ms.AcquireCount += ctr.acquire.Load()
				ms.AcquireWaitCount += ctr.wait.Load()
				ms.TimeAcquiringMicros += ctr.micros.Load()
			}
			out.Categories[c].Modes[m] = ms
		}
	}
	return out
}
