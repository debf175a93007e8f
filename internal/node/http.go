package node

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cairn-db/cairn/internal/replica"
)

// httpHandler serves the S3 API, and /healthz, /metrics and (on loopback)
// /debug/pprof/ to requests that carry no S3 signature: a signed GET of
// /metrics lists the bucket "metrics".
func (n *Node) httpHandler() http.Handler {
	ops, api := n.opsHandler(), n.s3Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpsPath(r.URL.Path) && r.Header.Get("Authorization") == "" && !r.URL.Query().Has("X-Amz-Credential") {
			ops.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

func isOpsPath(p string) bool {
	return p == "/healthz" || p == "/metrics" || strings.HasPrefix(p, "/debug/pprof/")
}

func (n *Node) opsHandler() http.Handler {
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

// healthz answers 200 when every range of every space with a replica here
// can serve (the replica leads with a lease, or leads a quiesced group, or
// follows a leader it knows) and the chunk store takes writes; 503 (with
// the ranges that cannot, and the chunk store's error) otherwise.
func (n *Node) healthz(w http.ResponseWriter, _ *http.Request) {
	type rangeProblem struct {
		Space string `json:"space"`
		Range uint64 `json:"range"`
		Error string `json:"error"`
	}
	problems := []rangeProblem{} // [] rather than null when there are none
	n.mu.RLock()
	for name, s := range n.mu.spaces {
		for _, r := range s.table() {
			rep := r.replica()
			if rep == nil {
				continue // held by other nodes
			}
			if err := rangeHealth(rep); err != nil {
				problems = append(problems, rangeProblem{name, r.desc().ID, err.Error()})
			}
		}
	}
	n.mu.RUnlock()
	body := map[string]any{"status": "ok", "node": n.id.NodeID, "problems": problems}
	storeErr := n.chunks.Err()
	if storeErr != nil {
		body["chunk_store"] = storeErr.Error() + " (restart the node to recover)"
	}
	w.Header().Set("Content-Type", "application/json")
	if len(problems) > 0 || storeErr != nil {
		body["status"] = "degraded"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body)
}

// rangeHealth says why a local replica cannot serve its range, or nil.
func rangeHealth(rep *replica.Replica) error {
	st := rep.Status()
	switch {
	case st.Leader == 0:
		return fmt.Errorf("range %d has no leader", st.RangeID)
	case st.IsLeader && !rep.Leads():
		return rep.ReadReady()
	}
	return nil
}
