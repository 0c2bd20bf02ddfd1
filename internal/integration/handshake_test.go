package integration

import (
	"testing"

	"humongo/internal/mongoerr"
)

// TestIntegrationHandshake checks the process answers the driver's handshake, ping and an
// unknown command (59) over TCP.
func TestIntegrationHandshake(t *testing.T) {
	db := shared(t).Database("admin")
	r := run(t, db, d("ping", 1))
	wantKeys(t, r, "ok")
	r = run(t, db, d("hello", 1))
	if !lookup(t, r, "isWritablePrimary").Boolean() {
		t.Errorf("hello: %s", r)
	}
	wantInt32(t, r, "maxWireVersion", 21)
	ce := runErr(t, db, d("noSuchCommand", 1), mongoerr.CommandNotFound)
	if ce.Message != "no such command: 'noSuchCommand'" {
		t.Errorf("errmsg %q", ce.Message)
	}
}
