package router

// humongos's own authorization checks: those of commands only a router has (mongos's
// cluster_*_cmd.cpp checks). Every command declares its check where it is registered; the
// checks both roles share are in internal/service (authz_checks.go).

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/auth"
	"humongo/internal/service"
)

// configSettings, configShards and configTags are the config collections the balancer and
// zone commands stand for in MongoDB's checks.
var (
	configSettings = auth.NS("config", "settings")
	configShards   = auth.NS("config", "shards")
	configTags     = auth.NS("config", "tags")
)

// authOnConfig: acts on one config collection (balancerStart/Stop: update on
// config.settings; balancerStatus: find on it).
func authOnConfig(r auth.Resource, acts ...auth.Action) service.AuthCheck {
	return func(s *service.AuthSession, _ string, _ bsoncore.Document) error {
		return allowedIf(s.Allowed(r, acts...))
	}
}

// authZone is the zone commands' check: enableSharding on the cluster, or the writes they
// make to the config collections (addShardToZone: update on config.shards;
// removeShardFromZone: that and find on config.tags; updateZoneKeyRange: find on
// config.shards, update and remove on config.tags).
func authZone(needs ...auth.Privilege) service.AuthCheck {
	return func(s *service.AuthSession, _ string, _ bsoncore.Document) error {
		if s.Allowed(auth.Cluster(), auth.EnableSharding) {
			return nil
		}
		return allowedIf(s.AllowedAll(needs))
	}
}

func priv(r auth.Resource, acts ...auth.Action) auth.Privilege {
	return auth.Privilege{Resource: r, Actions: auth.Actions(acts...)}
}

var (
	authAddShardToZone      = authZone(priv(configShards, auth.Update))
	authRemoveShardFromZone = authZone(priv(configShards, auth.Update), priv(configTags, auth.Find))
	authUpdateZoneKeyRange  = authZone(priv(configShards, auth.Find), priv(configTags, auth.Update, auth.Remove))
)

// authConfigureCollectionBalancing: splitChunk on the namespace, and moveChunk when the
// command changes whether or how its chunks move (defragmentCollection, enableBalancing).
func authConfigureCollectionBalancing(s *service.AuthSession, _ string, cmd bsoncore.Document) error {
	acts := []auth.Action{auth.SplitChunk}
	if service.Truthy(cmd.Lookup("defragmentCollection")) || cmd.Lookup("enableBalancing").Type != 0 {
		acts = append(acts, auth.MoveChunk)
	}
	return allowedIf(s.Allowed(service.FullNS(cmd), acts...))
}

// authCheckMetadataConsistency: checkMetadataConsistency on the cluster ({aggregate: 1} on
// admin), the database ({checkMetadataConsistency: 1} elsewhere) or the collection.
func authCheckMetadataConsistency(s *service.AuthSession, db string, cmd bsoncore.Document) error {
	r := service.CommandNS(db, cmd)
	if r.Kind == auth.KindDB && db == "admin" {
		r = auth.Cluster()
	}
	return allowedIf(s.Allowed(r, auth.CheckMetadataConsistency))
}

// authBulkWrite: each operation's write action on the namespace of nsInfo it names
// (insert, update with insert for an upsert, remove), and bypassDocumentValidation on
// each when asked.
func authBulkWrite(s *service.AuthSession, _ string, cmd bsoncore.Document) error {
	nsArr, _ := cmd.Lookup("nsInfo").ArrayOK()
	nsVals, _ := nsArr.Values()
	acts := make([][]auth.Action, len(nsVals))
	opsArr, _ := cmd.Lookup("ops").ArrayOK()
	ops, _ := opsArr.Values()
	for _, v := range ops {
		op, _ := v.DocumentOK()
		e, err := op.IndexErr(0)
		if err != nil {
			continue
		}
		i, ok := e.Value().AsInt64OK()
		if !ok || i < 0 || int(i) >= len(acts) {
			continue // the handler refuses it
		}
		switch e.Key() {
		case "insert":
			acts[i] = append(acts[i], auth.Insert)
		case "update":
			acts[i] = append(acts[i], auth.Update)
			if service.Truthy(op.Lookup("upsert")) {
				acts[i] = append(acts[i], auth.Insert)
			}
		case "delete":
			acts[i] = append(acts[i], auth.Remove)
		}
	}
	bypass := service.Truthy(cmd.Lookup("bypassDocumentValidation"))
	for i, v := range nsVals {
		d, _ := v.DocumentOK()
		ns, _ := d.Lookup("ns").StringValueOK()
		if len(acts[i]) == 0 {
			continue
		}
		if bypass {
			acts[i] = append(acts[i], auth.BypassDocumentValidation)
		}
		if !s.Allowed(auth.NSFromFull(ns), acts[i]...) {
			return service.ErrNotAuthorized
		}
	}
	return nil
}

// unsupportedAuth are the checks of the commands humongos registers but does not route yet
// (registry.go's unsupported): MongoDB's for each, so an unauthorized user learns no more
// than on a mongos. The user management commands' checks are simplified to their main
// action (they refuse every request here).
var unsupportedAuth = map[string]service.AuthCheck{
	"bulkWrite":                      authBulkWrite,
	"collStats":                      service.AuthOnNS(auth.CollStats),
	"dataSize":                       service.AuthOnFullNS(auth.Find),
	"setDefaultRWConcern":            service.AuthOnCluster(auth.SetDefaultRWConcern),
	"getDefaultRWConcern":            service.AuthOnCluster(auth.GetDefaultRWConcern),
	"setFeatureCompatibilityVersion": service.AuthOnCluster(auth.SetFeatureCompatibilityVersion),
	"createUser":                     service.AuthOnDB(auth.CreateUser),
	"dropUser":                       service.AuthOnDB(auth.DropUser),
	"createRole":                     service.AuthOnDB(auth.CreateRole),
	"dropRole":                       service.AuthOnDB(auth.DropRole),
	"usersInfo":                      service.AuthAnyUser,
	"rolesInfo":                      service.AuthAnyUser,
	"reshardCollection":              service.AuthOnFullNS(auth.ReshardCollection),
	"getShardMap":                    service.AuthOnCluster(auth.GetShardMap),
	"checkMetadataConsistency":       authCheckMetadataConsistency,
}

func allowedIf(ok bool) error {
	if !ok {
		return service.ErrNotAuthorized
	}
	return nil
}
