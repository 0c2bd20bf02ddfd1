package auth

import (
	"math/bits"
	"sort"
)

// Action is one of MongoDB's action types (find, insert, createUser, ...).
type Action uint8

// String is the action's MongoDB name.
func (a Action) String() string {
	if a < numActions {
		return actionNames[a]
	}
	return "unknown"
}

var actionByName = func() map[string]Action {
	m := make(map[string]Action, numActions)
	for i, n := range actionNames {
		m[n] = Action(i)
	}
	return m
}()

// ParseAction returns the action named name.
func ParseAction(name string) (Action, bool) {
	a, ok := actionByName[name]
	return a, ok
}

// ActionSet is a set of actions. The zero value is empty.
type ActionSet [(numActions + 63) / 64]uint64

// Actions returns the set of the given actions.
func Actions(as ...Action) ActionSet {
	var s ActionSet
	for _, a := range as {
		s.Add(a)
	}
	return s
}

// AllActions is the set of every action (anyAction's meaning).
func AllActions() ActionSet {
	var s ActionSet
	for a := Action(0); a < numActions; a++ {
		s.Add(a)
	}
	return s
}

// Add adds a to s.
func (s *ActionSet) Add(a Action) { s[a/64] |= 1 << (a % 64) }

// AddAll adds every action of o to s.
func (s *ActionSet) AddAll(o ActionSet) {
	for i := range s {
		s[i] |= o[i]
	}
}

// Has reports whether s holds a (or anyAction).
func (s ActionSet) Has(a Action) bool {
	return s[a/64]&(1<<(a%64)) != 0 || s[AnyAction/64]&(1<<(AnyAction%64)) != 0
}

// HasAll reports whether s holds every action of o.
func (s ActionSet) HasAll(o ActionSet) bool {
	if s.Has(AnyAction) {
		return true
	}
	for i := range s {
		if o[i]&^s[i] != 0 {
			return false
		}
	}
	return true
}

// Without returns s minus o.
func (s ActionSet) Without(o ActionSet) ActionSet {
	for i := range s {
		s[i] &^= o[i]
	}
	return s
}

// Empty reports whether s holds no action.
func (s ActionSet) Empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// Len is the number of actions in s.
func (s ActionSet) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Names returns the names of s's actions, sorted (as rolesInfo shows them).
func (s ActionSet) Names() []string {
	var out []string
	for a := Action(0); a < numActions; a++ {
		if s[a/64]&(1<<(a%64)) != 0 {
			out = append(out, actionNames[a])
		}
	}
	sort.Strings(out)
	return out
}
