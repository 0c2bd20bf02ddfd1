package configsvr

// The balancer's status (MongoDB 7.0's _configsvrBalancerStatus, Balancer::report). No
// balancer runs yet (chunk migration and balancing are issue 13): the report is built from
// config.settings alone, with no round ever run. The mode defaults to "off" rather than
// MongoDB's "full" so that the status tells the truth (nothing balances) unless an operator
// set a mode, which the future balancer will then honour.

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// BalancerSettingsID is config.settings's balancer document _id.
const BalancerSettingsID = "balancer"

// BalancerStatus is the balancer's report.
type BalancerStatus struct {
	Mode              string // "full", "autoSplitOnly" or "off"
	InBalancerRound   bool
	NumBalancerRounds int64
}

// BalancerStatus reads the balancer's mode from config.settings {_id: "balancer"}: mode as
// set, or the legacy stopped: true as "off"; without a document, "off".
func (m *Manager) BalancerStatus(ctx context.Context) (BalancerStatus, error) {
	st := BalancerStatus{Mode: "off"}
	docs, err := m.find(ctx, "settings", bsoncore.NewDocumentBuilder().AppendString("_id", BalancerSettingsID).Build(), 1)
	if err != nil || len(docs) == 0 {
		return st, err
	}
	d := docs[0]
	if mode, ok := d.Lookup("mode").StringValueOK(); ok {
		switch mode {
		case "full", "autoSplitOnly", "off":
			st.Mode = mode
		}
	} else if stopped, ok := d.Lookup("stopped").BooleanOK(); ok && !stopped {
		st.Mode = "full"
	}
	return st, nil
}
