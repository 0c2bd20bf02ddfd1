package router

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/optime"
	"humongo/internal/service"
	"humongo/internal/vclock"
)

// A router signs and validates $clusterTime with the config servers' keys (MongoDB's mongos
// runs a KeysCollectionManager over the config servers' admin.system.keys, which the config
// server primary makes): under authorization it gives its clock a keyring read from there
// and keeps it fresh until the cluster closes.

// configKeys is the router's vclock.KeySource.
type configKeys struct{ c *Cluster }

// KeysAfter reads the keys that expire after t from the config servers, at majority.
func (k configKeys) KeysAfter(ctx context.Context, t optime.Timestamp) ([]vclock.Key, error) {
	filter := bsoncore.NewDocumentBuilder().AppendString("purpose", vclock.KeyPurpose).
		AppendDocument("expiresAt", bsoncore.NewDocumentBuilder().AppendTimestamp("$gt", t.Secs(), t.Inc()).Build()).Build()
	cmd := bson.D{{Key: "find", Value: "system.keys"}, {Key: "filter", Value: bson.Raw(filter)},
		{Key: "sort", Value: bson.D{{Key: "expiresAt", Value: 1}}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}},
		{Key: "batchSize", Value: 10000}, {Key: "singleBatch", Value: true}}
	raw, err := k.c.config.RunCommand(ctx, "admin", cmd, readpref.Nearest())
	if err != nil {
		return nil, remoteError(err)
	}
	vals, _ := bsoncore.Document(raw).Lookup("cursor", "firstBatch").Array().Values()
	keys := make([]vclock.Key, 0, len(vals))
	for _, v := range vals {
		if d, ok := v.DocumentOK(); ok {
			if key, err := vclock.ParseKey(d); err == nil {
				keys = append(keys, key)
			}
		}
	}
	return keys, nil
}

// keyRefreshTimeout bounds one refresh against the config servers.
const keyRefreshTimeout = 10 * time.Second

// startClusterTimeKeys gives st's clock the config servers' keys and refreshes them (until
// c closes), when authorization is on.
func startClusterTimeKeys(st *service.State, c *Cluster) {
	if !st.Auth.Enabled {
		return
	}
	ring := vclock.NewKeyring(configKeys{c})
	st.Concern.Clock.SetKeys(ring)
	interval := time.Duration(st.Params.Int(service.ParamKeysRotationIntervalSec)) * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			rctx, rcancel := context.WithTimeout(ctx, keyRefreshTimeout)
			err := ring.Refresh(rctx)
			rcancel()
			delay := vclock.RefreshRetryDelay
			if err == nil {
				delay = vclock.RefreshDelay(st.Concern.Clock.ClusterTime(), ring.Newest(), interval)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	c.mu.Lock()
	c.onClose = append(c.onClose, func() {
		cancel()
		<-done
	})
	c.mu.Unlock()
}
