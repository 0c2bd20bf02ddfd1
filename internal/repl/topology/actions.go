package topology

import (
	"fmt"
	"time"

	"humongo/internal/optime"
)

// ActionKind names what the caller must do.
type ActionKind int

const (
	// ActSendHeartbeat: call PrepareHeartbeatRequest(now, Target) and send it.
	ActSendHeartbeat ActionKind = iota + 1
	// ActPersistDurable: make Durable durable before sending anything else
	// produced by the same call.
	ActPersistDurable
	// ActStartElection: call StartElection(now, DryRun) (election timeout,
	// priority takeover, catch-up takeover, dry-run won).
	ActStartElection
	// ActSendVoteRequests: send VoteRequest to every other voter (Targets).
	ActSendVoteRequests
	// ActStepDown: this node stopped being primary; kill conflicting
	// operations and fail pending write-concern waiters.
	ActStepDown
	// ActPrimaryElected: the node won; it reports PRIMARY but is not
	// writable. Start catch-up (CatchUpTarget) with the sync source given by
	// ChooseSyncSource; announce with heartbeats.
	ActPrimaryElected
	// ActEnterDrain: catch-up ended; drain the apply buffer, then call
	// CompleteDrain.
	ActEnterDrain
	// ActBecomePrimary: the node is a writable primary; write the "new
	// primary" no-op oplog entry first.
	ActBecomePrimary
	// ActReconfig: install Config (learned by heartbeat) via InstallConfig.
	ActReconfig
	// ActChangeSyncSource: stop the fetcher and choose a new sync source.
	ActChangeSyncSource
	// ActCommitPointAdvanced: wake write-concern and majority-read waiters.
	ActCommitPointAdvanced
)

var actionNames = map[ActionKind]string{
	ActSendHeartbeat: "send-heartbeat", ActPersistDurable: "persist", ActStartElection: "start-election",
	ActSendVoteRequests: "send-votes", ActStepDown: "step-down", ActPrimaryElected: "primary-elected",
	ActEnterDrain: "enter-drain", ActBecomePrimary: "become-primary", ActReconfig: "reconfig",
	ActChangeSyncSource: "change-sync-source", ActCommitPointAdvanced: "commit-point",
}

func (k ActionKind) String() string { return actionNames[k] }

// Action is one thing the caller must do; which fields are set depends on
// Kind.
type Action struct {
	Kind ActionKind
	// Target is the member for ActSendHeartbeat.
	Target int
	// Durable is the state for ActPersistDurable.
	Durable DurableState
	// DryRun for ActStartElection / ActSendVoteRequests.
	DryRun bool
	// Reason explains ActStartElection / ActStepDown / ActChangeSyncSource.
	Reason string
	// VoteRequest and Targets for ActSendVoteRequests.
	VoteRequest VoteRequest
	Targets     []int
	// CatchUpTarget for ActPrimaryElected; CatchUpDeadline is zero if
	// unbounded.
	CatchUpTarget   optime.OpTime
	CatchUpDeadline time.Time
	// Config for ActReconfig.
	Config *ReplSetConfig
	// CommitPoint for ActCommitPointAdvanced.
	CommitPoint optime.OpTime
}

func (a Action) String() string {
	switch a.Kind {
	case ActSendHeartbeat:
		return fmt.Sprintf("send-heartbeat to=%d", a.Target)
	case ActPersistDurable:
		return fmt.Sprintf("persist term=%d vote=%d@t%d", a.Durable.Term, a.Durable.LastVote.CandidateID, a.Durable.LastVote.Term)
	case ActStartElection:
		return fmt.Sprintf("start-election dry=%v reason=%q", a.DryRun, a.Reason)
	case ActSendVoteRequests:
		return fmt.Sprintf("send-votes dry=%v term=%d to=%v", a.DryRun, a.VoteRequest.Term, a.Targets)
	case ActStepDown:
		return fmt.Sprintf("step-down reason=%q", a.Reason)
	case ActPrimaryElected:
		return fmt.Sprintf("primary-elected catchup-target=%v", a.CatchUpTarget)
	case ActReconfig:
		return fmt.Sprintf("reconfig version=%d", a.Config.Version)
	case ActChangeSyncSource:
		return fmt.Sprintf("change-sync-source reason=%q", a.Reason)
	case ActCommitPointAdvanced:
		return fmt.Sprintf("commit-point %v", a.CommitPoint)
	}
	return a.Kind.String()
}
