package integration

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Authentication costs (issue 16, Performance): a new client's connection with and without
// SCRAM at the default iteration counts, and an authorized point read against an
// unauthenticated one.
// Run: go test -run '^$' -bench 'Connect|AuthFindOne' -benchtime 3s ./internal/integration/

// authBenchServer starts a humongod with --auth and a root user (root/rootpw).
func authBenchServer(b *testing.B) *server {
	b.Helper()
	s := newServer(b, "", "--auth")
	run(b, connect(b, s.uri()).Database("admin"), bson.D{{Key: "createUser", Value: "root"},
		{Key: "pwd", Value: "rootpw"}, {Key: "roles", Value: bson.A{"root"}}})
	return s
}

// BenchmarkConnect opens a new client, pings and disconnects per operation: the cost of a
// connection's handshake, and of its authentication when there is one.
func BenchmarkConnect(b *testing.B) {
	plain := newServer(b, "")
	authed := authBenchServer(b)
	for _, c := range []struct {
		name string
		s    *server
		mech string
	}{{"none", plain, ""}, {"SCRAM-SHA-1", authed, "SCRAM-SHA-1"}, {"SCRAM-SHA-256", authed, "SCRAM-SHA-256"}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var lat latencies
			for b.Loop() {
				if err := lat.time(func() error {
					o := clientOptions(c.s.uri())
					if c.mech != "" {
						o.SetAuth(options.Credential{AuthMechanism: c.mech, Username: "root", Password: "rootpw"})
					}
					cl, err := mongo.Connect(o)
					if err != nil {
						return err
					}
					defer func() { _ = cl.Disconnect(ctx) }()
					return cl.Ping(ctx, nil)
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			lat.report(b)
		})
	}
}

// BenchmarkAuthFindOneByID is BenchmarkFindOneByID on a server with --auth, as root: the
// steady-state cost of the authorization check of every command.
func BenchmarkAuthFindOneByID(b *testing.B) {
	s := authBenchServer(b)
	cl, err := mongo.Connect(clientOptions(s.uri()).SetAuth(options.Credential{Username: "root", Password: "rootpw"}))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cl.Disconnect(context.Background()) }()
	coll := cl.Database("bench").Collection("c")
	seed(b, coll)
	ctx := context.Background()
	var lat latencies
	i := int64(0)
	b.ResetTimer()
	for b.Loop() {
		if err := lat.time(func() error {
			i = (i + 7919) % benchDocs
			return coll.FindOne(ctx, bson.D{{Key: "_id", Value: i}}).Err()
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	lat.report(b)
}
