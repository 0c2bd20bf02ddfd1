package integration

import (
	"testing"

	"github.com/xdg-go/scram"
)

// newSCRAMClient is a SCRAM-SHA-256 client conversation for user and password (the driver's
// own SCRAM library).
func newSCRAMClient(t *testing.T, user, password string) *scram.ClientConversation {
	t.Helper()
	c, err := scram.SHA256.NewClient(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.NewConversation()
}
