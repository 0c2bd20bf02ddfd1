package configsvr

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// removeShard's replies in MongoDB 7.0's shapes (ConfigSvrRemoveShardCommand).
func TestRemoveShardReply(t *testing.T) {
	for _, c := range []struct {
		p    RemoveShardProgress
		want string
	}{
		{RemoveShardProgress{State: RemoveShardStarted, Shard: "s1", DBsToMove: []string{"a"}},
			`{"msg": "draining started successfully","state": "started","shard": "s1","note": "you need to drop or movePrimary these databases","dbsToMove": ["a"]}`},
		{RemoveShardProgress{State: RemoveShardOngoing, Shard: "s1", Chunks: 3, DBs: 1, JumboChunks: 1, DBsToMove: []string{"a"}},
			`{"msg": "draining ongoing","state": "ongoing","remaining": {"chunks": {"$numberLong":"3"},"dbs": {"$numberLong":"1"},"jumboChunks": {"$numberLong":"1"}},"note": "you need to drop or movePrimary these databases","dbsToMove": ["a"]}`},
		{RemoveShardProgress{State: RemoveShardOngoing, Shard: "s1"},
			`{"msg": "draining ongoing","state": "ongoing","remaining": {"chunks": {"$numberLong":"0"},"dbs": {"$numberLong":"0"},"jumboChunks": {"$numberLong":"0"}},"note": "you need to drop or movePrimary these databases","dbsToMove": []}`},
		{RemoveShardProgress{State: RemoveShardCompleted, Shard: "s1"},
			`{"msg": "removeshard completed successfully","state": "completed","shard": "s1"}`},
	} {
		if got := bson.Raw(c.p.Reply()).String(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.p.State, got, c.want)
		}
	}
}
