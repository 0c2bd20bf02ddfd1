package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

func init() {
	register(&Command{
		Name:      "listCommands",
		Handler:   runListCommands,
		Help:      "get a list of all db commands",
		Secondary: SecondaryAlways,
	})
}

// runListCommands lists the registry: {commands: {<name>: {help, requiresAuth, secondaryOk,
// adminOnly, apiVersions, deprecatedApiVersions}}}. Test-only commands appear only when
// enabled, as they exist only then in mongod.
func runListCommands(_ context.Context, env *Env, _ bsoncore.Document) (bsoncore.Document, error) {
	testCmds := env.State.Params.Bool("enableTestCommands")
	return doc(func(b []byte) []byte {
		idx, b := bsoncore.AppendDocumentElementStart(b, "commands")
		for _, c := range Default.All() {
			if c.TestOnly && !testCmds {
				continue
			}
			ci, b2 := bsoncore.AppendDocumentElementStart(b, c.Name)
			b2 = bsoncore.AppendStringElement(b2, "help", c.Help)
			b2 = bsoncore.AppendBooleanElement(b2, "requiresAuth", c.RequiresAuth)
			b2 = bsoncore.AppendBooleanElement(b2, "secondaryOk", c.SecondaryOk)
			b2 = bsoncore.AppendBooleanElement(b2, "adminOnly", c.AdminOnly)
			b2 = appendStrings(b2, "apiVersions", nil)
			b2 = appendStrings(b2, "deprecatedApiVersions", nil)
			b, _ = bsoncore.AppendDocumentEnd(b2, ci)
		}
		b, _ = bsoncore.AppendDocumentEnd(b, idx)
		return b
	}), nil
}
