package topology

import (
	"time"

	"humongo/internal/optime"
)

// LastVote is the durable record of the last real-election vote
// (local.replset.election): this node voted for CandidateID in Term.
type LastVote struct {
	Term        int64
	CandidateID int
}

// DurableState is everything the coordinator needs to survive a restart.
type DurableState struct {
	Term     int64
	LastVote LastVote
}

// HeartbeatRequest is replSetHeartbeat (ReplSetHeartbeatArgsV1).
type HeartbeatRequest struct {
	SetName       string
	ConfigVersion int64
	ConfigTerm    int64
	SenderID      int
	Term          int64
}

// HeartbeatResponse is ReplSetHeartbeatResponse plus ReplSetMetadata.
type HeartbeatResponse struct {
	// Err is set when the request was rejected (set name mismatch, ...); the
	// rest of the response is then meaningless except Term.
	Err           error
	SetName       string
	State         MemberState
	Term          int64
	ConfigVersion int64
	ConfigTerm    int64
	// Config is attached when the requester's config is older, so the
	// requester can install it (heartbeat reconfig).
	Config        *ReplSetConfig
	Applied       optime.OpTime
	Durable       optime.OpTime
	LastCommitted optime.OpTime
	ElectionTime  optime.Timestamp
	PrimaryID     int // -1 if unknown
	SyncSourceID  int // -1 if none
	// CatchingUp is true while the responder is a primary that has not yet
	// written in its own term (catch-up or drain); used by catch-up takeover.
	CatchingUp bool
}

// VoteRequest is replSetRequestVotes.
type VoteRequest struct {
	SetName       string
	DryRun        bool
	Term          int64
	CandidateID   int
	ConfigVersion int64
	ConfigTerm    int64
	LastApplied   optime.OpTime
}

// VoteResponse is the reply to replSetRequestVotes.
type VoteResponse struct {
	VoterID     int
	Term        int64
	DryRun      bool
	VoteGranted bool
	Reason      string
}

// MemberPosition is one element of replSetUpdatePosition's optimes array.
type MemberPosition struct {
	MemberID      int
	ConfigVersion int64
	Applied       optime.OpTime
	Durable       optime.OpTime
}

// UpdatePosition is replSetUpdatePosition with its ReplSetMetadata.
type UpdatePosition struct {
	SenderID  int
	Term      int64
	Positions []MemberPosition
}

// SyncSourceMetadata is the ReplSetMetadata/OplogQueryMetadata carried by an
// oplog fetcher response from the sync source.
type SyncSourceMetadata struct {
	SourceID      int
	Term          int64
	ConfigVersion int64
	LastCommitted optime.OpTime
	Applied       optime.OpTime
	PrimaryID     int
}

// MemberStatus is this node's view of one member (replSetGetStatus.members).
type MemberStatus struct {
	ID            int
	Self          bool
	Up            bool
	State         MemberState
	Term          int64
	Applied       optime.OpTime
	Durable       optime.OpTime
	LastHeartbeat time.Time
	Ping          time.Duration
	SyncSourceID  int
}

// Status is a snapshot of the coordinator for replSetGetStatus and tests.
type Status struct {
	SelfID        int
	State         MemberState
	Term          int64
	LastVote      LastVote
	PrimaryID     int
	SyncSourceID  int
	Applied       optime.OpTime
	Durable       optime.OpTime
	LastCommitted optime.OpTime
	Writable      bool
	LeaderMode    LeaderMode
	Members       []MemberStatus
}
