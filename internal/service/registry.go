package service

import (
	"context"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Handler runs one command. Handlers ignore unknown top-level fields unless the command is
// IDL-"strict" in MongoDB, in which case they reject them.
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
	// secondaryAllowed); mongod's Role enforces it. Left unset, Register resolves it from the
	// legacy SecondaryOk flag (SecondaryAlways), else SecondaryNever.
	Secondary SecondaryAllowed
	// SecondaryOk is what listCommands reports as secondaryOk: Register sets it to
	// Secondary != SecondaryNever. A registration may still set it instead of Secondary (it
	// then means SecondaryAlways unless secondaryByName says otherwise).
	SecondaryOk bool
	// Writes marks commands that modify data (blocked on secondaries, counted as writes).
	Writes bool
	// RequiresAuth is false only for the handful of commands an unauthenticated client may run
	// (hello, ping, buildInfo, saslStart, ...): Register sets it from PreAuth.
	RequiresAuth bool
	// PreAuth marks those commands.
	PreAuth bool
	// Auth is the command's authorization check (MongoDB's checkAuthForOperation), run with
	// authorization on before the command: ErrNotAuthorized (or another error) refuses it.
	// Nil: any authenticated user may run it.
	Auth func(s *AuthSession, db string, cmd bsoncore.Document) error
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
	// APIVersions are the Stable API versions the command is in; nil means by name
	// (APIVersionsOf: the API Version 1 commands). DeprecatedAPIVersions are those it is
	// deprecated in (apiDeprecationErrors).
	APIVersions, DeprecatedAPIVersions []string
}

// SecondaryAllowed is MongoDB's Command::AllowedOnSecondary: whether a replica-set member
// that is not a writable primary may run the command.
type SecondaryAllowed int8

const (
	// SecondaryUnset: Register resolves the value (see Command.Secondary).
	SecondaryUnset SecondaryAllowed = iota
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

// resolveSecondary fills c.Secondary when the registration left it unset (from the legacy
// SecondaryOk flag: SecondaryAlways for a non-writing command, else SecondaryNever) and
// derives c.SecondaryOk from it.
func resolveSecondary(c *Command) {
	if c.Secondary == SecondaryUnset {
		if c.SecondaryOk && !c.Writes {
			c.Secondary = SecondaryAlways
		} else {
			c.Secondary = SecondaryNever
		}
	}
	c.SecondaryOk = c.Secondary != SecondaryNever
}

// Registry maps exact command names and aliases to commands. Each binary builds its own
// (commands.NewRegistry for humongod, router.NewRegistry for humongos) and hands it to the
// server; there is no package-level default. A registry is filled before the server starts
// and only read afterwards.
type Registry struct {
	byName map[string]*Command
	all    []*Command
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]*Command{}} }

// Register adds c under its name and aliases, resolving Secondary and defaulting Counter to
// "command". Registering a name twice is a programming error and panics at startup, never
// on client input.
func (r *Registry) Register(c *Command) {
	resolveSecondary(c)
	c.RequiresAuth = !c.PreAuth
	if c.Counter == "" {
		c.Counter = "command"
	}
	for _, n := range append([]string{c.Name}, c.Aliases...) {
		if _, dup := r.byName[n]; dup {
			panic(fmt.Sprintf("service: command %q registered twice", n))
		}
		r.byName[n] = c
	}
	r.all = append(r.all, c)
	sort.Slice(r.all, func(i, j int) bool { return r.all[i].Name < r.all[j].Name })
}

// Lookup returns the command registered under exactly name, or nil.
func (r *Registry) Lookup(name string) *Command { return r.byName[name] }

// List returns every command, sorted by name.
func (r *Registry) List() []*Command { return r.all }

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
