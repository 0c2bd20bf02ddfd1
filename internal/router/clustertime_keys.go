package router

import (
	"context"
	"time"

	"humongo/internal/client"
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
	keys, err := client.FindSigningKeys(ctx, k.c.config, t)
	if err != nil {
		return nil, remoteError(err)
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
