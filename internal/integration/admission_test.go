package integration

import "testing"

// TestIntegrationTicketsFromStartupParameter checks that --setParameter sizes the ticket pools
// a real humongod admits operations with, as serverStatus reports them.
func TestIntegrationTicketsFromStartupParameter(t *testing.T) {
	s := newServer(t, "", "--setParameter", "storageEngineConcurrentReadTransactions=16")
	cl := connect(t, s.uri())
	r := run(t, cl.Database("admin"), d("serverStatus", 1))
	wantInt32(t, r, "wiredTiger.concurrentTransactions.read.totalTickets", 16)
	wantInt32(t, r, "wiredTiger.concurrentTransactions.write.totalTickets", 128)
}
