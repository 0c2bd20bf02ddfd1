package commands

// A cursor belongs to the logical session of the command that opened it: a getMore must come
// from the same session, or from no session when it was opened without one (MongoDB's
// getmore_cmd.cpp validateLSID; without authentication these are its answers, the Unauthorized
// of checkCursorSessionPrivilege applying only with auth on). killCursors does not check the
// session (cursor_manager.cpp's killCursor).

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
)

// cursorSessionKey is the session the command ctx runs in, as a cursor stores it (its id and
// uid, 48 bytes), or nil without an lsid.
func cursorSessionKey(ctx context.Context) []byte {
	r := operation.RequestOf(ctx)
	if r == nil || len(r.Session.LSID) == 0 {
		return nil
	}
	k, err := service.ParseLsid(bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: r.Session.LSID})
	if err != nil {
		return nil
	}
	return append(append(make([]byte, 0, len(k.ID)+len(k.UID)), k.ID[:]...), k.UID[:]...)
}

// registerCursor registers c under the session of the command that opened it, owned by the
// connection's authenticated users.
func registerCursor(ctx context.Context, env *service.Env, c *cursor.Cursor) int64 {
	c.LSID = cursorSessionKey(ctx)
	c.Users = env.Auth.Users()
	id := env.State.Cursors().Register(c)
	if stmt := txnStmtOf(ctx); stmt != nil {
		stmt.NoteCursor(id)
	}
	return id
}

// lsidString prints a session key as MongoDB prints a LogicalSessionId: id, uid, txnNumber and
// txnUUID separated by " - " (the last two empty for a client's session).
func lsidString(key []byte) string {
	var k lsc.Key
	copy(k.ID[:], key)
	copy(k.UID[:], key[len(k.ID):])
	return k.String()
}

// checkCursorSession refuses a getMore on cursor c (id) from another session than c's.
func checkCursorSession(ctx context.Context, id int64, c *cursor.Cursor) error {
	op := cursorSessionKey(ctx)
	switch {
	case op != nil && c.LSID == nil:
		return mongoerr.Newf(mongoerr.Location50736,
			"Cannot run getMore on cursor %d, which was not created in a session, in session %s", id, lsidString(op))
	case op == nil && c.LSID != nil:
		return mongoerr.Newf(mongoerr.Location50737,
			"Cannot run getMore on cursor %d, which was created in session %s, without an lsid", id, lsidString(c.LSID))
	case op != nil && string(op) != string(c.LSID):
		return mongoerr.Newf(mongoerr.Location50738,
			"Cannot run getMore on cursor %d, which was created in session %s, in session %s", id, lsidString(c.LSID), lsidString(op))
	}
	return nil
}
