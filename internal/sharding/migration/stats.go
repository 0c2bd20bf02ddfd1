package migration

import (
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Statistics are serverStatus.shardingStatistics' migration counters (MongoDB's
// ShardingStatistics).
type Statistics struct {
	DonorStarted, DonorCommitted, DonorAborted atomic.Int64
	DonorMillis, CloneMillis                   atomic.Int64
	CriticalSectionMillis, CommitMillis        atomic.Int64
	DocsClonedOnDonor                          atomic.Int64
	RecipientStarted                           atomic.Int64
	DocsClonedOnRecipient, BytesClonedOnRecip  atomic.Int64
}

// AppendServerStatus appends the shardingStatistics section.
func (s *Service) AppendServerStatus(dst []byte) []byte {
	st := &s.Stats
	return bsoncore.AppendDocumentElement(dst, "shardingStatistics", bsoncore.NewDocumentBuilder().
		AppendInt64("countDonorMoveChunkStarted", st.DonorStarted.Load()).
		AppendInt64("countDonorMoveChunkCommitted", st.DonorCommitted.Load()).
		AppendInt64("countDonorMoveChunkAborted", st.DonorAborted.Load()).
		AppendInt64("totalDonorMoveChunkTimeMillis", st.DonorMillis.Load()).
		AppendInt64("totalDonorChunkCloneTimeMillis", st.CloneMillis.Load()).
		AppendInt64("totalCriticalSectionCommitTimeMillis", st.CommitMillis.Load()).
		AppendInt64("totalCriticalSectionTimeMillis", st.CriticalSectionMillis.Load()).
		AppendInt64("countDocsClonedOnDonor", st.DocsClonedOnDonor.Load()).
		AppendInt64("countRecipientMoveChunkStarted", st.RecipientStarted.Load()).
		AppendInt64("countDocsClonedOnRecipient", st.DocsClonedOnRecipient.Load()).
		AppendInt64("countBytesClonedOnRecipient", st.BytesClonedOnRecip.Load()).Build())
}
