package commands

import (
	"humongo/internal/service"
)

// _configsvrBalancerStatus: the balancer's report (MongoDB 7.0's
// ConfigSvrBalancerStatusCommand, Balancer::report), which the router's balancerStatus
// passes through; the handler is in sharding_balancer.go.
func addConfigsvrBalancerStatus(r *service.Registry) {
	add(r, &service.Command{
		Name:      "_configsvrBalancerStatus",
		Auth:      service.AuthInternal,
		Handler:   runConfigsvrBalancerStatus,
		Help:      "Internal command, which is exported by the sharding config server. Do not call directly. Returns the balancer status.",
		AdminOnly: true,
		Secondary: service.SecondaryNever,
	})
}
