// Package service is the server-wide context every role shares (MongoDB's ServiceContext)
// and the request types of the service entry point: the State a binary builds once, the
// per-connection Conn and per-operation Op records (currentOp, killOp), the command Registry
// value each binary fills with its own handlers, the server parameter registry (Params), and
// the Role interface through which the role-neutral front end (internal/server) calls a
// role's per-command hooks (replication-state admission, read/write concern, $clusterTime
// gossip).
//
// humongod's handlers live in internal/commands and humongos's in internal/router; both
// register into a *Registry built by their binary, never into a package-level default.
// Handlers that are the same on every role (ping, buildInfo, getParameter, listCommands)
// live here so neither role copies them.
//
// A handler receives the command body as raw BSON (the OP_MSG body with document sequences
// merged, `$db` included) and an *Env with the connection and server state, and returns the
// reply fields or an error. Handlers never build error replies: they return errors (ideally
// a *mongoerr.Error) and internal/server converts them to {ok: 0, errmsg, code, codeName} at
// its single error boundary. The reply a handler returns must not contain `ok`; the server
// appends it. Handlers must not panic on any input.
//
// Authorization: every registered command is either PreAuth (an unauthenticated client may
// run it: hello, ping, buildInfo, listCommands, the SASL conversation, and the test-only fail
// point commands) or declares Auth, its check of MongoDB 7.0's required privileges, which
// dispatch runs before the handler when authorization is on (authn.go's Authorize; a refusal
// is Unauthorized "not authorized on <db> to execute command ..."). The checks both roles
// share are in authz_checks.go (CRUD, aggregate's walk over its pipeline, DDL with views,
// renameCollection, the listing commands); the cluster's internal commands need internal on
// the cluster, which only __system has. A few handlers finish the job themselves, as MongoDB's
// run() does: listDatabases and listCollections {authorizedCollections} list only what the
// user holds a privilege on, currentOp {$ownOps} and $currentOp without allUsers list only
// the user's connections, killOp kills another user's operation only with killop, getMore
// (CheckGetMore) and killCursors (CheckKillCursors) check the cursor's users. A commands test
// walks both registries so a new command cannot forget its check.
//
// Sessions belong to their user: with authorization on, a command's lsid, and the ids
// endSessions, killSessions and refreshSessions name, take the user's digest as their uid
// (WithSessionOwner, OwnSessions), so another user naming the same id has another session;
// $listLocalSessions without users lists the caller's own (OwnSessionUIDs).
//
// Known deviation: a command naming its collection by UUID needs the privilege on the whole
// database.
//
// There is no spec section for this layer; behaviour follows MongoDB 7.0's ServiceContext
// and service_entry_point_common.
package service
