package ddl

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ClusterTime is the config server's cluster time plus one increment: a validAfter for a
// chunk history entry that no earlier commit can have used.
func ClusterTime(ctx context.Context, remote *Remote) bson.Timestamp { return clusterTime(ctx, remote) }
