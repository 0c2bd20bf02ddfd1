package service

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Role is what the role-neutral front end (internal/server) asks of the role it serves
// (humongod's data node, humongos's router) around each command, in this order: Admit, Begin,
// the handler, Finish, then Decorate on every reply (errors included). The server owns
// parsing, the registry lookup, $db, maxTimeMS, the operation record, the failCommand fail
// point and the error boundary; a Role owns what depends on the node's replication,
// concern and cluster-time state.
type Role interface {
	// Admit is the gate before the command runs: a data node's replication-state check
	// (writes need a writable primary, user reads secondaryOk on a secondary).
	Admit(env *Env, c *Command, cmd bsoncore.Document) error
	// Begin starts the operation (readConcern waits, the read timestamp, $clusterTime
	// gossip in) and returns the context the handler runs with and a token for Finish and
	// Decorate (nil when there is nothing to carry).
	Begin(ctx context.Context, env *Env, c *Command, cmd bsoncore.Document) (context.Context, any, error)
	// Finish completes the operation after the handler returned reply or err (write concern
	// waits). A write whose write concern failed reports wce (the writeConcernError
	// document) with a nil error: the reply is then ok: 1 with writeConcernError.
	Finish(ctx context.Context, env *Env, op any, reply bsoncore.Document, err error) (out, wce bsoncore.Document, _ error)
	// Decorate adds the role's fields to every reply, errors included ($clusterTime,
	// operationTime). op is Begin's token, nil when Begin was not reached.
	Decorate(env *Env, op any, reply bsoncore.Document) bsoncore.Document
	// TopologyVersion is the counter of the topologyVersion that not-primary and shutdown
	// errors carry.
	TopologyVersion() int64
	// Shutdown releases what the role holds for clients (cursors) once no operation runs,
	// before the server closes its Closers (the storage engine).
	Shutdown()
}

// ErrCloseConnection makes the server close the connection without replying (failCommand's
// closeConnection, the shutdown command's own connection).
var ErrCloseConnection = errors.New("close the connection without a reply")
