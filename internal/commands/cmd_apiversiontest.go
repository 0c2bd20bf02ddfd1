package commands

// MongoDB's Stable API test commands (test_api_version_2_commands.cpp), present only with
// enableTestCommands: commands in API version 2, in 1 and 2, deprecated in 2 and
// (testRemoval) in 1, that drivers' versioned-API spec tests run to provoke APIStrictError
// and APIDeprecationError. Each answers with the API parameters it was sent.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addAPIVersionTestCommands(r *service.Registry) {
	for _, c := range []struct {
		name             string
		versions, deprec []string
	}{
		{"testVersion2", []string{"2"}, nil},
		{"testVersions1And2", []string{"1", "2"}, nil},
		{"testDeprecationInVersion2", []string{"1", "2"}, []string{"2"}},
		{"testRemoval", []string{"1"}, nil},
	} {
		add(r, &service.Command{
			Name:                  c.name,
			Handler:               runAPIVersionTest,
			Auth:                  service.AuthAnyUser,
			Help:                  "Stable API test command: answers with the API parameters it was sent",
			Secondary:             service.SecondaryAlways,
			TestOnly:              true,
			APIVersions:           c.versions,
			DeprecatedAPIVersions: c.deprec,
		})
	}
}

// runAPIVersionTest answers {apiVersion, apiStrict, apiDeprecationErrors} as sent
// (APIParameters::appendInfo); the checks themselves ran before (CheckAPIParameters).
func runAPIVersionTest(_ context.Context, _ *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	idx, b := bsoncore.AppendDocumentStart(nil)
	for _, f := range []string{"apiVersion", "apiStrict", "apiDeprecationErrors"} {
		if v := lookup(cmd, f); v.Type != 0 {
			b = bsoncore.AppendValueElement(b, f, v)
		}
	}
	b, _ = bsoncore.AppendDocumentEnd(b, idx)
	return b, nil
}
