package commands

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/service"
)

// _configsvrBalancerStatus: the balancer's report (MongoDB 7.0's
// ConfigSvrBalancerStatusCommand, Balancer::report), which the router's balancerStatus
// passes through. No balancer runs yet (issue 13), so no round is ever in progress or
// counted; see configsvr.Manager.BalancerStatus for the mode.
func addConfigsvrBalancerStatus(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrBalancerStatus",
		Handler:   runConfigsvrBalancerStatus,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Returns the balancer status.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}

func runConfigsvrBalancerStatus(ctx context.Context, env *service.Env, _ bsoncore.Document) (bsoncore.Document, error) {
	m, err := configsvrManager(env)
	if err != nil {
		return nil, err
	}
	st, err := m.BalancerStatus(ctx)
	if err != nil {
		return nil, err
	}
	return bsoncore.NewDocumentBuilder().AppendString("mode", st.Mode).
		AppendBoolean("inBalancerRound", st.InBalancerRound).
		AppendInt64("numBalancerRounds", st.NumBalancerRounds).
		AppendInt64("term", env.State.Repl.Term()).Build(), nil
}
