package router

// Read preference on routed reads (spec sharding.md "Targeting a specific host within a
// shard"; MongoDB's ReadPreferenceSetting and the ShardRemote's targeter): find, count,
// distinct, aggregate and explain run on the member of each target shard that the client's
// $readPreference selects (primary when absent). A router cursor's shard cursors stay on the
// member that opened them: its getMores and killCursors are pinned to that host
// (remote.host). An aggregate with $out or $merge follows it as well (MongoDB 5.0+: a
// secondary runs the pipeline and writes through its primary); every other command goes to
// the primaries.

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/tag"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// minMaxStaleness is MongoDB's smallest maxStalenessSeconds (90 s, the spec's
// smallMaxStalenessSeconds plus idle write period).
const minMaxStaleness = 90

type readPrefKey struct{}

// withReadPref makes rp the read preference of the shard requests made under ctx (nil or
// primary: the shards' primaries).
func withReadPref(ctx context.Context, rp *readpref.ReadPref) context.Context {
	return context.WithValue(ctx, readPrefKey{}, rp)
}

// readPrefFrom is ctx's read preference for shard requests, nil for primary.
func readPrefFrom(ctx context.Context) *readpref.ReadPref {
	rp, _ := ctx.Value(readPrefKey{}).(*readpref.ReadPref)
	if rp == nil || rp.Mode() == readpref.PrimaryMode {
		return nil
	}
	return rp
}

// readPrefHandler wraps a read command's handler: it parses the command's $readPreference
// and runs h with it in the context.
func readPrefHandler(h service.Handler) service.Handler {
	return func(ctx context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
		v, err := cmd.LookupErr("$readPreference")
		if err != nil {
			return h(ctx, env, cmd)
		}
		rp, err := parseReadPref(v)
		if err != nil {
			return nil, err
		}
		return h(withReadPref(ctx, rp), env, cmd)
	}
}

// parseReadPref parses {mode, tags, maxStalenessSeconds, hedge} with MongoDB's checks and
// messages (ReadPreferenceSetting::fromInnerBSON). hedge is accepted and ignored (hedged
// reads are deprecated in MongoDB 8.0 and not done here).
func parseReadPref(v bsoncore.Value) (*readpref.ReadPref, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "$readPreference must be an object, not %s", v.Type)
	}
	mv, err := doc.LookupErr("mode")
	if err != nil {
		return nil, mongoerr.New(mongoerr.NoSuchKey, "Missing expected field \"mode\"")
	}
	modeStr, ok := mv.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "\"mode\" had the wrong type. Expected string, found %s", mv.Type)
	}
	mode, err := readpref.ModeFromString(modeStr)
	if err != nil || !mode.IsValid() || modeStr != mode.String() {
		return nil, mongoerr.Newf(mongoerr.FailedToParse,
			"Could not parse $readPreference mode '%s'. Only the modes 'primary', 'primaryPreferred', 'secondary', 'secondaryPreferred', and 'nearest' are supported.", modeStr)
	}
	var opts []readpref.Option
	if tv, err := doc.LookupErr("tags"); err == nil {
		sets, err := parseTagSets(tv)
		if err != nil {
			return nil, err
		}
		// [{}] (match any) is the default and allowed with primary.
		if mode == readpref.PrimaryMode && !(len(sets) == 0 || len(sets) == 1 && len(sets[0]) == 0) {
			return nil, mongoerr.New(mongoerr.BadValue, "Only empty tags are allowed with primary read preference")
		}
		if mode != readpref.PrimaryMode && len(sets) > 0 {
			opts = append(opts, readpref.WithTagSets(sets...))
		}
	}
	if sv, err := doc.LookupErr("maxStalenessSeconds"); err == nil {
		secs, ok := sv.AsFloat64OK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "maxStalenessSeconds field must be a number, not %s", sv.Type)
		}
		switch {
		case secs < 0:
			return nil, mongoerr.New(mongoerr.BadValue, "maxStalenessSeconds must be a non-negative integer")
		case secs > 0 && secs < minMaxStaleness:
			return nil, mongoerr.Newf(mongoerr.BadValue, "maxStalenessSeconds value can not be less than %d", minMaxStaleness)
		case secs > 0 && mode == readpref.PrimaryMode:
			return nil, mongoerr.New(mongoerr.BadValue, "mode primary does not allow for maxStalenessSeconds")
		case secs > 0:
			opts = append(opts, readpref.WithMaxStaleness(time.Duration(secs*float64(time.Second))))
		}
	}
	if hv, err := doc.LookupErr("hedge"); err == nil {
		if _, ok := hv.DocumentOK(); !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "hedge field must be an object, not %s", hv.Type)
		}
		if mode == readpref.PrimaryMode {
			return nil, mongoerr.New(mongoerr.BadValue, "cannot enable hedging for primary read preference")
		}
	}
	rp, err := readpref.New(mode, opts...)
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.BadValue, "$readPreference: %v", err)
	}
	return rp, nil
}

// parseTagSets reads tags: [{k: "v", ...}, ...].
func parseTagSets(v bsoncore.Value) ([]tag.Set, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "tags must be an array, not %s", v.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.FailedToParse, "tags: %v", err)
	}
	sets := make([]tag.Set, 0, len(vals))
	for _, sv := range vals {
		d, ok := sv.DocumentOK()
		if !ok {
			return nil, mongoerr.Newf(mongoerr.TypeMismatch, "each tag set must be an object, not %s", sv.Type)
		}
		els, err := d.Elements()
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.FailedToParse, "tags: %v", err)
		}
		set := tag.Set{}
		for _, el := range els {
			s, ok := el.Value().StringValueOK()
			if !ok {
				return nil, mongoerr.Newf(mongoerr.TypeMismatch, "tag %q must be a string, not %s", el.Key(), el.Value().Type)
			}
			set = append(set, tag.Tag{Name: el.Key(), Value: s})
		}
		sets = append(sets, set)
	}
	return sets, nil
}

// pin points r at the member of its shard that ctx's read preference selects, in a new
// session of that host's pooled client (ending any previous one). Without a read preference
// (primary) r stays on the replica set client, whose primary the driver follows.
func (r *remote) pin(ctx context.Context, c *Cluster) error {
	rp := readPrefFrom(ctx)
	if rp == nil {
		return nil
	}
	host, err := r.rs.SelectHost(ctx, rp)
	if err != nil {
		return shardError(ctx, r.shard, err)
	}
	cl, err := c.hosts.Get(host)
	if err != nil {
		return err
	}
	sess, err := cl.StartSession()
	if err != nil {
		return fmt.Errorf("start a session on %s of shard %s: %w", host, r.shard, err)
	}
	r.end()
	r.host, r.rp, r.sess = host, rp, sess
	return nil
}
