package service

// Killing logical sessions (MongoDB's killSessionsLocal: kill_sessions_local.cpp) and what
// the logical session cache's refresh asks of the server (lsc.Service, MongoDB's
// ServiceLiaisonMongod): the sessions of running operations and open cursors, and killing
// cursors by session.

import (
	"humongo/internal/cursor"
	"humongo/internal/txn/lsc"
)

// KillSessions kills the sessions match selects: it interrupts their running operations
// (Interrupted, as killOp), kills their cursors (a later getMore fails with CursorNotFound;
// one running fails with CursorKilled) and calls the cache's OnKill hooks (the transaction
// layer aborts their unprepared transactions there). It returns how many operations and
// cursors it killed. The sessions stay in the cache and the sessions collection, as in
// MongoDB. self, the killing command's own operation, is spared (nil: none).
func (s *State) KillSessions(self *Op, match func(lsc.Key) bool) (ops, cursors int) {
	ops = s.Clients.KillSessionOps(self, match, ErrInterrupted())
	cursors = s.KillCursors(match)
	if s.Sessions != nil {
		s.Sessions.NotifyKill(match)
	}
	return ops, cursors
}

// ActiveOpSessions returns the sessions of the operations running now (lsc.Service).
func (s *State) ActiveOpSessions() []lsc.Key { return s.Clients.ActiveSessions() }

// OpenCursorSessions returns the sessions of the open cursors (lsc.Service).
func (s *State) OpenCursorSessions() []lsc.Key {
	raw := s.Cursors().Sessions()
	out := make([]lsc.Key, 0, len(raw))
	for _, b := range raw {
		if k, ok := cursorKey(b); ok {
			out = append(out, k)
		}
	}
	return out
}

// KillCursors kills the cursors of the sessions match selects (lsc.Service).
func (s *State) KillCursors(match func(lsc.Key) bool) int {
	return s.Cursors().KillIf(func(c *cursor.Cursor) bool {
		k, ok := cursorKey(c.LSID)
		return ok && match(k)
	})
}

// cursorKey decodes a cursor's session (Cursor.LSID: the id's 16 bytes then the uid's 32).
func cursorKey(b []byte) (lsc.Key, bool) {
	var k lsc.Key
	if len(b) != len(k.ID)+len(k.UID) {
		return k, false
	}
	copy(k.ID[:], b)
	copy(k.UID[:], b[len(k.ID):])
	return k, true
}

// ActiveSessions returns the sessions of the running operations, each once.
func (cl *Clients) ActiveSessions() []lsc.Key {
	seen := map[lsc.Key]bool{}
	var out []lsc.Key
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op != nil && op.InSession && !seen[op.Session] {
			seen[op.Session] = true
			out = append(out, op.Session)
		}
	}
	return out
}

// KillSessionOps interrupts the running operations but self of the sessions match selects
// with cause and returns how many.
func (cl *Clients) KillSessionOps(self *Op, match func(lsc.Key) bool, cause error) int {
	n := 0
	for _, c := range cl.Conns() {
		c.mu.Lock()
		op := c.op
		c.mu.Unlock()
		if op != nil && op != self && op.InSession && match(op.Session) {
			op.kill(cause)
			n++
		}
	}
	return n
}
