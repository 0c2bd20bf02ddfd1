package commands

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/router"
	"humongo/internal/service"
)

// internalCommands are the commands of the cluster's own protocols that do not start with
// an underscore: only __system (internal on the cluster) may run them.
var internalCommands = map[string]bool{
	"replSetHeartbeat": true, "replSetRequestVotes": true, "replSetUpdatePosition": true,
	"replSetGetRBID": true, "voteCommitIndexBuild": true, "coordinateCommitTransaction": true,
	"prepareTransaction": true, "splitChunk": true, "mergeChunks": true,
	"testingReplicaSetHostRewrites": true,
}

// TestEveryCommandDeclaresItsAuth walks humongod's and humongos's registries: every command
// is either one an unauthenticated client may run (PreAuth) or declares its authorization
// check, so a new command cannot forget one. The cluster's internal commands must refuse
// root and admit __system.
func TestEveryCommandDeclaresItsAuth(t *testing.T) {
	root := session(t, auth.RoleName{Role: "root", DB: "admin"})
	system := session(t, auth.RoleName{Role: "__system", DB: "admin"})
	for _, reg := range []struct {
		name string
		r    *service.Registry
	}{{"humongod", NewRegistry()}, {"humongos", router.NewRegistry()}} {
		n := 0
		for _, c := range reg.r.List() {
			n++
			switch {
			case c.PreAuth && c.Auth != nil:
				t.Errorf("%s %s: PreAuth with an Auth check that never runs", reg.name, c.Name)
			case !c.PreAuth && c.Auth == nil:
				t.Errorf("%s %s: neither PreAuth nor an Auth check", reg.name, c.Name)
			}
			if c.Auth == nil || reg.name == "humongos" && c.Name == "mergeChunks" {
				continue // humongos's mergeChunks is the user command (splitChunk)
			}
			if strings.HasPrefix(c.Name, "_") || internalCommands[c.Name] {
				cmd := bsoncore.NewDocumentBuilder().AppendString(c.Name, "db.coll").Build()
				if err := c.Auth(root, "admin", cmd); !errors.Is(err, service.ErrNotAuthorized) {
					t.Errorf("%s %s: root may run an internal command (%v)", reg.name, c.Name, err)
				}
				if err := c.Auth(system, "admin", cmd); err != nil {
					t.Errorf("%s %s: __system may not run it: %v", reg.name, c.Name, err)
				}
			}
		}
		if n < 80 {
			t.Errorf("%s: only %d commands registered", reg.name, n)
		}
	}
}

func session(t *testing.T, roles ...auth.RoleName) *service.AuthSession {
	t.Helper()
	res, err := auth.Resolve(roles, nil)
	if err != nil {
		t.Fatal(err)
	}
	return service.NewAuthSession(auth.UserName{User: "u", DB: "admin"}, res)
}
