// Package auth is authentication and authorization as data and pure functions, below every
// server layer: MongoDB's action types and action sets, resource patterns and privileges, the
// built-in roles (builtin_roles.yml as Go tables), user and role documents of
// admin.system.users and admin.system.roles, role graph resolution, and SCRAM-SHA-1/256
// credentials and server conversations (over github.com/xdg-go/scram) with MongoDB's
// password digest and salt lengths. Who is logged in on a connection, the user cache and the
// per-command checks live in internal/service; the commands that change users and roles in
// internal/commands (mongod) and internal/router (humongos).
//
// The spec does not cover authentication; the reference is MongoDB 7.0's behaviour
// (docs: "Built-In Roles", "Privilege Actions", "Resource Document", "SCRAM") with the internal
// authentication of ../shared/spec/sharding.md (members and routers authenticate to each
// other as __system with the keyfile).
package auth
