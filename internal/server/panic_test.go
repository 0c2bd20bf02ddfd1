package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/commands"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// A handler that panics answers InternalError; the connection and the server keep serving.
func TestHandlerPanicIsContained(t *testing.T) {
	reg := commands.NewRegistry()
	reg.Register(&service.Command{Name: "testPanic", Handler: func(context.Context, *service.Env, bsoncore.Document) (bsoncore.Document, error) {
		panic(fmt.Sprintf("deliberate panic at %v", time.Now()))
	}})
	s, err := New(mongodConfig(nil, reg))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close() })
	cl := connect(t, s)
	ctx := context.Background()
	err = cl.Database("admin").RunCommand(ctx, bson.D{{Key: "testPanic", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != int32(mongoerr.InternalError) {
		t.Fatalf("panicking command: got %v, want InternalError", err)
	}
	if err := cl.Database("admin").RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("server stopped serving after a handler panic: %v", err)
	}
}
