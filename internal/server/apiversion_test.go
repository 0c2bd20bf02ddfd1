package server

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"humongo/internal/mongoerr"
)

// The Stable API parameters, as mongod's initializeAPIParameters checks them: the version,
// apiStrict against the command's API versions (and an aggregate's stages),
// apiDeprecationErrors, their types, and requireApiVersion.
func TestStableAPIParameters(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	v1Strict := []bson.E{{Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: true}}
	cases := []struct {
		name string
		cmd  bson.D
		code mongoerr.Code
		msg  string
	}{
		{"unknown version", bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "server_will_never_support_this_api_version"}},
			mongoerr.APIVersionError, `API version must be "1"`},
		{"version 2", bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "2"}}, mongoerr.APIVersionError, "Cannot accept API version 2"},
		{"strict without version", bson.D{{Key: "ping", Value: 1}, {Key: "apiStrict", Value: true}},
			mongoerr.Location4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion"},
		{"strict of the wrong type", bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: 1}},
			mongoerr.TypeMismatch, "BSON field 'APIParametersFromClient.apiStrict' is the wrong type 'int', expected type 'bool'"},
		{"distinct is not in version 1", append(bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "x"}}, v1Strict...),
			mongoerr.APIStrictError, "Provided apiStrict:true, but the command distinct is not in API Version 1. Information on supported commands and migrations in API Version 1 can be found at https://dochub.mongodb.org/core/manual-versioned-api"},
		{"testVersion2", append(bson.D{{Key: "testVersion2", Value: 1}}, v1Strict...),
			mongoerr.APIStrictError, "Provided apiStrict:true, but the command testVersion2 is not in API Version 1."},
		{"stage outside version 1", append(bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}}},
			{Key: "cursor", Value: bson.D{}}}, v1Strict...),
			mongoerr.APIStrictError, "$listLocalSessions is not allowed with 'apiStrict: true' in API Version 1"},
	}
	for _, c := range cases {
		_, err := runCmd(t, cl, "admin", c.cmd)
		ce := wantCode(t, err, c.code)
		if !strings.HasPrefix(ce.Message, c.msg) {
			t.Errorf("%s: errmsg %q, want %q", c.name, ce.Message, c.msg)
		}
	}
	// Commands in version 1 run under apiStrict; the test command echoes the parameters.
	mustRun(t, cl, "admin", append(bson.D{{Key: "ping", Value: 1}}, v1Strict...))
	r := mustRun(t, cl, "admin", append(bson.D{{Key: "testVersions1And2", Value: 1}, {Key: "apiDeprecationErrors", Value: false}}, v1Strict...))
	if r.Lookup("apiVersion").StringValue() != "1" || !r.Lookup("apiStrict").Boolean() {
		t.Errorf("testVersions1And2: %v", r)
	}
	r = mustRun(t, cl, "admin", bson.D{{Key: "listCommands", Value: 1}})
	vals, _ := r.Lookup("commands", "find", "apiVersions").Array().Values()
	if len(vals) != 1 || vals[0].StringValue() != "1" {
		t.Errorf("listCommands find.apiVersions: %v", vals)
	}

	// requireApiVersion: a client declaring API version 1 keeps working (the version-less
	// one is refused; service's TestRequireAPIVersion pins that without a driver monitor
	// racing the check).
	apiCl := connect(t, s, options.Client().SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1)))
	mustRun(t, apiCl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "requireApiVersion", Value: true}})
	mustRun(t, apiCl, "admin", bson.D{{Key: "ping", Value: 1}})
	mustRun(t, apiCl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "requireApiVersion", Value: false}})
}
