package router

// The router's uptime reporting (MongoDB's ShardingUptimeReporter): every 10 seconds a
// router upserts its document in config.mongos, which sh.status() reads to list the active
// routers ("active mongoses": pinged in the last minute).

import (
	"context"
	"os"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/service"
)

// uptimeInterval is how often a router reports (kUptimeReportInterval).
const uptimeInterval = 10 * time.Second

// ReportUptime reports this router (listening on port, started at started) until ctx ends.
// A failed report is retried at the next interval: the config servers may not be up yet.
func (c *Cluster) ReportUptime(ctx context.Context, port int, started time.Time) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	self := host + ":" + strconv.Itoa(port)
	t := time.NewTicker(uptimeInterval)
	defer t.Stop()
	for {
		c.reportUptime(ctx, self, started)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) reportUptime(ctx context.Context, self string, started time.Time) {
	ctx, cancel := context.WithTimeout(ctx, uptimeInterval)
	defer cancel()
	now := time.Now()
	set := bson.D{
		{Key: "ping", Value: bson.NewDateTimeFromTime(now)},
		{Key: "up", Value: int64(now.Sub(started) / time.Second)},
		{Key: "waiting", Value: true},
		{Key: "mongoVersion", Value: service.Version},
		{Key: "advisoryHostFQDNs", Value: bson.A{}},
	}
	cmd := bson.D{{Key: "update", Value: "mongos"}, {Key: "updates", Value: bson.A{bson.D{
		{Key: "q", Value: bson.D{{Key: "_id", Value: self}}},
		{Key: "u", Value: bson.D{{Key: "$set", Value: set}}},
		{Key: "upsert", Value: true},
	}}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}, {Key: "wtimeout", Value: int32(uptimeInterval / time.Millisecond)}}}}
	_, _ = c.config.RunCommand(ctx, "config", cmd, nil)
}
