package main

// The sharding section of `humongo status` for a sharded deployment: the shards (draining
// ones marked) and, per sharded collection, how many chunks each shard holds, read through a
// router from the config servers' catalog (config.shards, config.collections, config.chunks),
// as sh.status() shows them.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// shardingStatus is the sharded part of `humongo status --json`.
type shardingStatus struct {
	Shards      []shardRow   `json:"shards"`
	Collections []collChunks `json:"collections"`
	// Error is why the catalog could not be read (no router answering, say).
	Error string `json:"error,omitempty"`
}

type shardRow struct {
	ID       string `json:"id" bson:"_id"`
	Host     string `json:"host" bson:"host"`
	Draining bool   `json:"draining,omitempty" bson:"draining"`
}

// collChunks is one sharded collection: its shard key and chunks per shard id.
type collChunks struct {
	NS     string           `json:"ns"`
	Key    string           `json:"key"`
	Chunks map[string]int64 `json:"chunks"`
	Total  int64            `json:"total"`
	// NoBalance is config.collections' noBalance (sh.disableBalancing).
	NoBalance bool `json:"noBalance,omitempty"`
}

// readShardingStatus reads the catalog through the routers of uri.
func readShardingStatus(ctx context.Context, uri, keyFile string, timeout time.Duration) *shardingStatus {
	st := &shardingStatus{}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	o, err := withInternalAuth(options.Client().ApplyURI(uri).SetAppName("humongo").
		SetServerSelectionTimeout(timeout).SetConnectTimeout(timeout), keyFile)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	client, err := mongo.Connect(o)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	config := client.Database("config")
	if err := findAll(ctx, config.Collection("shards"), bson.D{}, &st.Shards); err != nil {
		st.Error = err.Error()
		return st
	}
	var raws []bson.Raw
	if err := findAll(ctx, config.Collection("collections"), bson.D{}, &raws); err != nil {
		st.Error = err.Error()
		return st
	}
	uuids := map[string]int{} // a collection's uuid (its bytes) -> index in st.Collections
	for _, r := range raws {
		var c struct {
			ID        string   `bson:"_id"`
			Key       bson.Raw `bson:"key"`
			NoBalance bool     `bson:"noBalance"`
		}
		if err := bson.Unmarshal(r, &c); err != nil {
			continue
		}
		_, data, ok := r.Lookup("uuid").BinaryOK()
		if !ok {
			continue
		}
		uuids[string(data)] = len(st.Collections)
		cc := collChunks{NS: c.ID, Key: c.Key.String(), Chunks: map[string]int64{}, NoBalance: c.NoBalance}
		st.Collections = append(st.Collections, cc)
	}
	cur, err := config.Collection("chunks").Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "uuid", Value: "$uuid"}, {Key: "shard", Value: "$shard"}}},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		st.Error = err.Error()
		return st
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup("_id").DocumentOK()
		_, data, _ := id.Lookup("uuid").BinaryOK()
		shard, _ := id.Lookup("shard").StringValueOK()
		n, _ := cur.Current.Lookup("n").AsInt64OK()
		if i, ok := uuids[string(data)]; ok {
			st.Collections[i].Chunks[shard] += n
			st.Collections[i].Total += n
		}
	}
	if err := cur.Err(); err != nil {
		st.Error = err.Error()
	}
	slices.SortFunc(st.Collections, func(a, b collChunks) int { return strings.Compare(a.NS, b.NS) })
	return st
}

func findAll(ctx context.Context, coll *mongo.Collection, filter bson.D, out any) error {
	cur, err := coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return err
	}
	return cur.All(ctx, out)
}

// printShardingStatus writes the section as tables.
func printShardingStatus(w io.Writer, st *shardingStatus) error {
	if st.Error != "" {
		fmt.Fprintf(w, "\nsharding catalog unavailable: %s\n", st.Error)
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tHOST\tDRAINING")
	for _, s := range st.Shards {
		draining := "-"
		if s.Draining {
			draining = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.ID, s.Host, draining)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Collections) == 0 {
		fmt.Fprintln(w, "no sharded collections")
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COLLECTION\tKEY\tCHUNKS\tPER SHARD")
	for _, c := range st.Collections {
		ids := make([]string, 0, len(c.Chunks))
		for id := range c.Chunks {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = fmt.Sprintf("%s: %d", id, c.Chunks[id])
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", c.NS, c.Key, c.Total, strings.Join(parts, ", "))
	}
	return tw.Flush()
}
