// Package commands holds Humongo's database commands, one file per command (cmd_hello.go,
// cmd_ping.go, ...), and the registry that maps command names to handlers with their metadata.
// The same registry serves humongod and, later, humongos.
//
// A handler receives the command body as raw BSON (the OP_MSG body with document sequences
// merged, `$db` included) and an *Env with the connection and server state, and returns the
// reply fields or an error. Handlers never build error replies: they return errors (ideally a
// *mongoerr.Error) and internal/server converts them to {ok: 0, errmsg, code, codeName} at its
// single error boundary. The reply a handler returns must not contain `ok`; the server appends
// it. Handlers must not panic on any input.
//
// Command names are case-sensitive, as in MongoDB; the few historical spellings
// (isMaster/ismaster, buildinfo) are registered as aliases.
//
// There is no spec section for the command layer; behaviour follows MongoDB 7.0 mongod.
package commands

import (
	"context"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Handler runs one command. Handlers ignore unknown top-level fields unless the command is
// IDL-"strict" in MongoDB, in which case they call checkStrict.
type Handler func(ctx context.Context, env *Env, cmd bsoncore.Document) (bsoncore.Document, error)

// Command is a registered command and its metadata.
type Command struct {
	// Name is the canonical name (the one listCommands shows).
	Name string
	// Aliases are alternative exact spellings (isMaster, ismaster).
	Aliases []string
	Handler Handler
	// Help is the text listCommands shows.
	Help string
	// AdminOnly commands run only against the admin database (Unauthorized otherwise).
	AdminOnly bool
	// Secondary says where in the replica set the command may run (MongoDB's
	// secondaryAllowed); CheckReplState enforces it. Left unset, Register resolves it from
	// secondaryByName, else from the legacy SecondaryOk flag (SecondaryAlways), else
	// SecondaryNever.
	Secondary SecondaryAllowed
	// SecondaryOk is what listCommands reports as secondaryOk: Register sets it to
	// Secondary != SecondaryNever. A registration may still set it instead of Secondary (it
	// then means SecondaryAlways unless secondaryByName says otherwise).
	SecondaryOk bool
	// Writes marks commands that modify data (blocked on secondaries, counted as writes).
	Writes bool
	// RequiresAuth is false only for the handful of commands an unauthenticated client may run
	// (hello, ping, buildInfo, saslStart, ...).
	RequiresAuth bool
	// AllowedOnOpQuery marks commands MongoDB 6+ still accepts through legacy OP_QUERY (the
	// handshake); every other command there fails with UnsupportedOpQueryCommand.
	AllowedOnOpQuery bool
	// TestOnly commands exist only when the enableTestCommands parameter is set at startup
	// (configureFailPoint, waitForFailPoint), as in mongod.
	TestOnly bool
	// LocalhostOnly commands are refused from non-loopback clients (shutdown).
	LocalhostOnly bool
	// Counter is the opcounters field this command increments ("command" when empty).
	Counter string
}

// SecondaryAllowed is MongoDB's Command::AllowedOnSecondary: whether a replica-set member
// that is not a writable primary may run the command.
type SecondaryAllowed int8

const (
	// secondaryUnset: Register resolves the value (see Command.Secondary).
	secondaryUnset SecondaryAllowed = iota
	// SecondaryNever commands need a writable primary (NotWritablePrimary 10107): writes and
	// DDL.
	SecondaryNever
	// SecondaryOptIn commands (user reads) run on a secondary only when the client opts in
	// with a non-primary read preference or $secondaryOk (else NotPrimaryNoSecondaryOk 13435).
	SecondaryOptIn
	// SecondaryAlways commands run in any member state: handshake, diagnostics, the
	// replication protocol's own commands, getMore of a cursor a read already opened.
	SecondaryAlways
)

func (s SecondaryAllowed) String() string {
	switch s {
	case SecondaryNever:
		return "never"
	case SecondaryOptIn:
		return "optIn"
	case SecondaryAlways:
		return "always"
	}
	return "unset"
}

// secondaryByName classifies commands whose registration lives in a file this table's owner
// does not edit (or that does not exist yet) and corrects legacy SecondaryOk registrations.
// Values are MongoDB 7.0's secondaryAllowed for the command.
var secondaryByName = map[string]SecondaryAllowed{
	"find":      SecondaryOptIn,
	"aggregate": SecondaryOptIn,
	"getMore":   SecondaryAlways,
	"dbHash":    SecondaryAlways,
}

// resolveSecondary fills c.Secondary (see its comment) and derives c.SecondaryOk from it.
func resolveSecondary(c *Command) {
	if c.Secondary == secondaryUnset {
		switch s, ok := secondaryByName[c.Name]; {
		case ok:
			c.Secondary = s
		case c.SecondaryOk && !c.Writes:
			c.Secondary = SecondaryAlways
		default:
			c.Secondary = SecondaryNever
		}
	}
	c.SecondaryOk = c.Secondary != SecondaryNever
}

// Registry maps exact command names and aliases to commands.
type Registry struct {
	byName map[string]*Command
	all    []*Command
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]*Command{}} }

// Register adds c under its name and aliases. Registering a name twice is a programming error
// and panics at init, never on client input.
func (r *Registry) Register(c *Command) {
	resolveSecondary(c)
	for _, n := range append([]string{c.Name}, c.Aliases...) {
		if _, dup := r.byName[n]; dup {
			panic(fmt.Sprintf("commands: %q registered twice", n))
		}
		r.byName[n] = c
	}
	r.all = append(r.all, c)
	sort.Slice(r.all, func(i, j int) bool { return r.all[i].Name < r.all[j].Name })
}

// Lookup returns the command registered under exactly name, or nil.
func (r *Registry) Lookup(name string) *Command { return r.byName[name] }

// All returns every command, sorted by name.
func (r *Registry) All() []*Command { return r.all }

// Default is the registry the command files register into at init.
var Default = NewRegistry()

func register(c *Command) {
	if c.Counter == "" {
		c.Counter = "command"
	}
	Default.Register(c)
}

// GenericArguments are the top-level fields any command accepts (MongoDB's
// generic_argument.idl): drivers add them to every command.
var GenericArguments = map[string]bool{
	"$db": true, "lsid": true, "txnNumber": true, "autocommit": true, "startTransaction": true,
	"stmtId": true, "$clusterTime": true, "$readPreference": true, "$audit": true,
	"$client": true, "$configServerState": true, "$configTime": true, "$topologyTime": true,
	"$oplogQueryData": true, "$replData": true, "$queryOptions": true, "comment": true,
	"maxTimeMS": true, "readConcern": true, "writeConcern": true, "apiVersion": true,
	"apiStrict": true, "apiDeprecationErrors": true, "clientOperationKey": true,
	"databaseVersion": true, "shardVersion": true, "tracking_info": true, "coordinator": true,
	"help": true, "mayBypassWriteBlocking": true, "$readOnly": true, "$traceCtx": true,
	"$tenant": true, "expectPrefix": true, "txnRetryCounter": true, "$secondaryOk": true,
	"$query": true, "$orderby": true, "$hint": true, "$comment": true,
}
