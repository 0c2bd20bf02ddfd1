package service

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// ServerStatusWant returns serverStatus's section filter: a section is reported unless the
// command turns it off with {<section>: 0}, as in mongod.
func ServerStatusWant(cmd bsoncore.Document) func(section string) bool {
	return func(section string) bool {
		v := lookupValue(cmd, section)
		return v.Type == 0 || Truthy(v)
	}
}

// AppendServerStatusBase appends the serverStatus fields every role reports: host, version,
// process (the binary's name), pid, uptime, localTime and the connections, network and
// opcounters sections that want lets through.
func AppendServerStatusBase(b []byte, env *Env, process string, want func(section string) bool) []byte {
	st := env.State
	c := &st.Counters
	now := time.Now()
	up := now.Sub(st.StartTime)
	current, active := st.Clients.Len()
	b = bsoncore.AppendStringElement(b, "host", st.Host)
	b = bsoncore.AppendStringElement(b, "version", Version)
	b = bsoncore.AppendStringElement(b, "process", process)
	b = bsoncore.AppendInt64Element(b, "pid", int64(st.Pid))
	b = bsoncore.AppendDoubleElement(b, "uptime", float64(int64(up.Seconds())))
	b = bsoncore.AppendInt64Element(b, "uptimeMillis", up.Milliseconds())
	b = bsoncore.AppendInt64Element(b, "uptimeEstimate", int64(up.Seconds()))
	b = bsoncore.AppendDateTimeElement(b, "localTime", now.UnixMilli())
	if want("connections") {
		avail := int64(st.MaxIncomingConnections) - int64(current)
		b = bsoncore.AppendDocumentElement(b, "connections", bsoncore.NewDocumentBuilder().
			AppendInt32("current", int32(current)).
			AppendInt32("available", int32(max(avail, 0))).
			AppendInt32("totalCreated", int32(c.ConnsCreated.Load())).
			AppendInt32("active", int32(active)).Build())
	}
	if want("network") {
		b = bsoncore.AppendDocumentElement(b, "network", bsoncore.NewDocumentBuilder().
			AppendInt64("bytesIn", c.BytesIn.Load()).
			AppendInt64("bytesOut", c.BytesOut.Load()).
			AppendInt64("physicalBytesIn", c.BytesIn.Load()).
			AppendInt64("physicalBytesOut", c.BytesOut.Load()).
			AppendInt64("numRequests", c.NumRequests.Load()).Build())
	}
	if want("security") {
		// Authentication attempts per mechanism (received, successful), as mongod's
		// security.authentication.mechanisms: failed logins are received minus successful.
		a := &st.Auth.Counters
		mech := func(received, ok int64) bsoncore.Document {
			return bsoncore.NewDocumentBuilder().AppendDocument("authenticate", bsoncore.NewDocumentBuilder().
				AppendInt64("received", received).AppendInt64("successful", ok).Build()).Build()
		}
		b = bsoncore.AppendDocumentElement(b, "security", bsoncore.NewDocumentBuilder().
			AppendDocument("authentication", bsoncore.NewDocumentBuilder().
				AppendDocument("mechanisms", bsoncore.NewDocumentBuilder().
					AppendDocument("SCRAM-SHA-1", mech(a.SHA1Received.Load(), a.SHA1Succeeded.Load())).
					AppendDocument("SCRAM-SHA-256", mech(a.SHA256Received.Load(), a.SHA256Succeeded.Load())).
					Build()).Build()).Build())
	}
	if want("opcounters") {
		b = bsoncore.AppendDocumentElement(b, "opcounters", bsoncore.NewDocumentBuilder().
			AppendInt64("insert", c.Insert.Load()).
			AppendInt64("query", c.Query.Load()).
			AppendInt64("update", c.Update.Load()).
			AppendInt64("delete", c.Delete.Load()).
			AppendInt64("getmore", c.GetMore.Load()).
			AppendInt64("command", c.Command.Load()).Build())
	}
	return b
}
