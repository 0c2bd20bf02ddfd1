package service

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/txn/lsc"
)

// ParseLsid parses a logical session id document {id: UUID, uid?: BinData(32 bytes)}. Without
// authentication the uid must be absent or the no-user uid.
func ParseLsid(v bsoncore.Value) (lsc.Key, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return lsc.Key{}, mongoerr.Newf(mongoerr.TypeMismatch,
			"BSON field 'lsid' is the wrong type '%s', expected type 'object'", bsonutil.TypeName(v.Type))
	}
	idv := lookupValue(d, "id")
	if idv.Type == 0 {
		return lsc.Key{}, mongoerr.New(mongoerr.Location40414, "BSON field 'LogicalSessionFromClient.id' is missing but a required field")
	}
	sub, data, ok := idv.BinaryOK()
	if !ok || sub != 4 {
		return lsc.Key{}, mongoerr.New(mongoerr.TypeMismatch,
			"BSON field 'LogicalSessionFromClient.id' is the wrong type, expected type 'uuid'")
	}
	if len(data) != 16 {
		return lsc.Key{}, mongoerr.New(mongoerr.InvalidUUID, "uuid must be a 16-byte binary field with UUID (4) subtype")
	}
	k := lsc.Key{UID: lsc.NoUserUID}
	copy(k.ID[:], data)
	if uv := lookupValue(d, "uid"); uv.Type != 0 {
		_, u, ok := uv.BinaryOK()
		if !ok || len(u) != 32 {
			return lsc.Key{}, mongoerr.New(mongoerr.TypeMismatch,
				"BSON field 'LogicalSessionFromClient.uid' must be a 32-byte binary field")
		}
		copy(k.UID[:], u)
	}
	return k, nil
}

// ParseLsidArray parses the array argument of endSessions/refreshSessions/killSessions.
func ParseLsidArray(cmdName string, v bsoncore.Value) ([]lsc.Key, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'", cmdName, cmdName, bsonutil.TypeName(v.Type))
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, mongoerr.Newf(mongoerr.InvalidBSON, "invalid %s array: %v", cmdName, err)
	}
	if len(vals) > maxSessionsPerCommand {
		return nil, mongoerr.Newf(mongoerr.BadValue,
			"The number of sessions in %s must not exceed %d", cmdName, maxSessionsPerCommand)
	}
	keys := make([]lsc.Key, 0, len(vals))
	for _, x := range vals {
		k, err := ParseLsid(x)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// maxSessionsPerCommand bounds the session arrays one command may carry.
const maxSessionsPerCommand = 10000

// lookupValue returns the top-level field key of d (Type 0 when absent).
func lookupValue(d bsoncore.Document, key string) bsoncore.Value {
	v, err := d.LookupErr(key)
	if err != nil {
		return bsoncore.Value{}
	}
	return v
}
