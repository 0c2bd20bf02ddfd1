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
// There is no spec section for this layer; behaviour follows MongoDB 7.0's ServiceContext
// and service_entry_point_common.
package service
