package node

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func (n *Node) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", n.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{Registry: n.metrics.reg}))
	// Profiles for operators, only while the listener is on loopback: they
	// have no access control yet.
	if ip := net.ParseIP(n.cfg.Listen); n.cfg.Listen == "localhost" || (ip != nil && ip.IsLoopback()) {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// healthz answers 200 when every range of every space can serve reads
// locally, 503 (with the ranges that cannot) otherwise.
func (n *Node) healthz(w http.ResponseWriter, _ *http.Request) {
	type rangeProblem struct {
		Space string `json:"space"`
		Range uint64 `json:"range"`
		Error string `json:"error"`
	}
	var problems []rangeProblem
	n.mu.RLock()
	for name, s := range n.mu.spaces {
		for _, r := range s.table() {
			rep := r.replica()
			if rep == nil {
				continue // held by other nodes
			}
			if err := rep.ReadReady(); err != nil {
				problems = append(problems, rangeProblem{name, r.desc().ID, err.Error()})
			}
		}
	}
	n.mu.RUnlock()
	w.Header().Set("Content-Type", "application/json")
	status := "ok"
	if len(problems) > 0 {
		status = "degraded"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(map[string]any{"status": status, "node": n.id.NodeID, "problems": problems})
}
