// Package txncoord is a shard primary's two-phase commit coordinator for cross-shard
// transactions (spec: sharding.md "Transactions", "Committing a Transaction", "Two-phase
// Commit Protocol", "Aborting a Transaction"), MongoDB's TransactionCoordinatorService and
// TransactionCoordinator.
//
// coordinateCommitTransaction creates (or joins) the coordinator of (lsid, txnNumber). Each
// step is durable before the next: the participant list is written to
// config.transaction_coordinators (majority), prepareTransaction goes to every participant's
// primary, the votes decide (commit at the largest prepareTimestamp, or abort with the first
// refusal), the decision is written (majority), commitTransaction with commitTimestamp (or
// abortTransaction) goes to every participant until each acknowledges, and the document is
// deleted. A Service owns the running coordinators of one term: StepUp resumes every document
// at its persisted step, StepDown interrupts them. The package knows nothing of the node: its
// Store and Send are given (internal/commands wires them over the in-process runner and the
// shard registry's replica-set clients).
package txncoord
