package commands

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
)

// appendLsid appends {id: UUID} under key.
func appendLsid(b []byte, key string, id catalog.UUID) []byte {
	return bsoncore.AppendDocumentElement(b, key,
		bsoncore.NewDocumentBuilder().AppendBinary("id", 4, id[:]).Build())
}
