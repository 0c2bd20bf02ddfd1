package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

func addConnectionStatus(r *service.Registry) {
	add(r, &service.Command{
		Name:      "connectionStatus",
		Handler:   runConnectionStatus,
		Help:      "Returns connection-specific information such as logged-in users and their roles",
		Secondary: service.SecondaryAlways,
	})
}

// runConnectionStatus reports the connection's authenticated users; without authentication
// there are none. showPrivileges adds an empty authenticatedUserPrivileges, as mongod does.
func runConnectionStatus(_ context.Context, _ *service.Env, cmd bsoncore.Document) (bsoncore.Document, error) {
	showPrivs := truthy(lookup(cmd, "showPrivileges"))
	return doc(func(b []byte) []byte {
		idx, b := bsoncore.AppendDocumentElementStart(b, "authInfo")
		b = appendStrings(b, "authenticatedUsers", nil)
		b = appendStrings(b, "authenticatedUserRoles", nil)
		if showPrivs {
			b = appendStrings(b, "authenticatedUserPrivileges", nil)
		}
		b, _ = bsoncore.AppendDocumentEnd(b, idx)
		return b
	}), nil
}
