package commands

import "humongo/internal/service"

// addConfigureFailPoint registers configureFailPoint (shared with humongos: service).
func addConfigureFailPoint(r *service.Registry) {
	add(r, service.ConfigureFailPointCommand())
}
