package commands

import "humongo/internal/service"

// addClusterCommands registers the sharded-cluster commands of the config server and the
// shards (issue 12's cluster commands: addShard's two halves, database creation, the
// balancer's status).
func addClusterCommands(r *service.Registry) {
	addConfigsvrAddShard(r)
	addConfigsvrRemoveShard(r)
	addMovePrimaryCommands(r)
	addAddShardIdentity(r)
	addConfigsvrCreateDatabase(r)
	addConfigsvrBalancerStatus(r)
	addBalancerCommands(r)
	addZoneCommands(r)
}
