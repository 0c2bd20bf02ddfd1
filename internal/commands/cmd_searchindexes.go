package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

// The search index commands (createSearchIndexes, updateSearchIndex, dropSearchIndex,
// listSearchIndexes) and the $listSearchIndexes stage are passthroughs to an Atlas search
// index management host. humongod has none, so after the IDL checks it answers as a mongod
// without searchIndexManagementHostAndPort does (search_index_commands.cpp,
// throwIfNotRunningWithRemoteSearchIndexManagement): SearchNotEnabled.
func addSearchIndexCommands(r *service.Registry) {
	for _, c := range []struct {
		name, help string
		required   map[string]string // IDL-required field -> its type ("array", "object")
	}{
		{"createSearchIndexes", "Command to create a search index. Only supported with Atlas.", map[string]string{"indexes": "array"}},
		{"updateSearchIndex", "Command to update a search index. Only supported with Atlas.", map[string]string{"definition": "object"}},
		{"dropSearchIndex", "Command to drop a search index. Only supported with Atlas.", nil},
		{"listSearchIndexes", "Command to list search indexes. Only supported with Atlas.", nil},
	} {
		add(r, &service.Command{
			Name: c.name,
			Help: c.help,
			Handler: func(_ context.Context, env *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
				if _, err := ddlCollectionNS(env, cmd); err != nil {
					return nil, err
				}
				for f, typ := range c.required {
					v := lookup(cmd, f)
					if v.Type == 0 {
						return nil, writeMissing(c.name + "." + f)
					}
					if typ == "array" && v.Type != bsoncore.TypeArray || typ == "object" && v.Type != bsoncore.TypeEmbeddedDocument {
						return nil, typeMismatch(c.name, f, v.Type, typ)
					}
				}
				return nil, errSearchNotEnabled()
			},
			Secondary: service.SecondaryNever,
		})
	}
}

// errSearchNotEnabled is MongoDB's answer to search index management without Atlas.
func errSearchNotEnabled() error {
	return mongoerr.New(mongoerr.SearchNotEnabled, "Using Atlas Search Database Commands and the $listSearchIndexes "+
		"aggregation stage requires additional configuration. Please connect to Atlas or an AtlasCLI local "+
		"deployment to enable. For more information on how to connect, see "+
		"https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs.")
}
