// Package member makes a data node a replica-set member (MongoDB's ReplicationCoordinatorImpl
// wiring in mongod's startup, spec/replication.md "Steady State Replication", "Replication and
// Topology Coordinators"): over the node's storage (operation.DB) it opens the oplog and
// installs its writer as the op observer, builds the coordinator with its persistence (Store:
// local.system.replset and local.replset.election), its "new primary" no-op writer and its
// top of oplog, lets the coordinator drive the node's two-phase index builds
// (repl/indexbuild), starts it, and starts data replication (initial sync, fetcher, applier,
// rollback).
//
// What lies above replication is handed in as hooks: which running operations a step-down
// kills (Config.Coord.KillWrites), what a rollback must drop (Config.Data.OnRollback: the
// retryable-write sessions; Config.Data.KillCursors: the server's cursors), and how the
// server publishes the coordinator before it starts (Config.Publish). humongod's role wires
// them (commands.AttachReplication); in-process replication tests wire their own.
package member
