package wire

import "time"

// ClusterReport is the CLUSTER op's answer, encoded as JSON.
type ClusterReport struct {
	Cluster string `json:"cluster"` // the cluster's id
	// Epoch is the meta service revision of the newest entry of the
	// cluster map or the range table: it grows with every write to them,
	// but deleting a space's ranges can lower it, so it tells a copy is
	// stale by differing, not by being smaller.
	Epoch int64  `json:"epoch"`
	Node  uint64 `json:"node"` // the node that answered
	// Oracle is the node leading the timestamp oracle (0: none right now).
	Oracle uint64          `json:"oracle"`
	Nodes  []ClusterNode   `json:"nodes"`
	Meta   []ClusterMember `json:"meta"`
	// Ranges lists every range with its replicas; Leader is known for the
	// ranges the answering node holds a replica of (0 otherwise).
	Ranges []ClusterRange `json:"ranges"`
}

// ClusterNode is one node of the cluster map.
type ClusterNode struct {
	ID       uint64    `json:"id"`
	Native   string    `json:"native"`
	Peer     string    `json:"peer"`
	HTTP     string    `json:"http"`
	Zone     string    `json:"zone"`
	State    string    `json:"state"`
	Capacity uint64    `json:"capacity"`
	Started  time.Time `json:"started"`
	// Replicas and Leaders count the ranges the node holds and leads (as
	// far as the answering node knows).
	Replicas int `json:"replicas"`
	Leaders  int `json:"leaders"`
}

// ClusterMember is one member of the meta service.
type ClusterMember struct {
	Name    string `json:"name"`
	Voter   bool   `json:"voter"`
	PeerURL string `json:"peer_url"`
}

// ClusterRange is one range of the range table.
type ClusterRange struct {
	ID       uint64   `json:"id"`
	Space    string   `json:"space"`
	Start    []byte   `json:"start"`
	End      []byte   `json:"end"`
	Replicas []uint64 `json:"replicas"`
	Learners []uint64 `json:"learners,omitempty"`
	Leader   uint64   `json:"leader"`
	Epoch    uint64   `json:"epoch"`
}
