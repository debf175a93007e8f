package meta

// DefaultReplicas is a space's replication factor when its settings do not
// say: three copies, capped by the number of nodes.
const DefaultReplicas = 3
