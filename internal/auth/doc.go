// Package auth is who may do what in a Cairn cluster, and how that is
// proven:
//
//   - access keys and their grants (key.go): read, write or admin on a
//     space (or every space), and the cluster-admin grant for keys, nodes
//     and join tokens; a Keyring (keyring.go) is the set a node checks
//     requests against, replaced whole when the keys change;
//   - the native protocol's handshake (handshake.go): challenge-response
//     with HMAC-SHA256 over both sides' nonces and, on TLS, the
//     connection's exported keying material, so that the secret never
//     crosses the wire and a proof cannot be replayed or relayed;
//   - secrets at rest (seal.go): AES-256-GCM under the cluster key, which
//     every node keeps in its data directory (keys.go's file format) and
//     never in the meta service;
//   - cluster membership (ca.go, token.go): the cluster's own certificate
//     authority, the certificates of its nodes (mutual TLS between them)
//     and one-time join tokens, proven by HMAC without sending the token's
//     secret;
//   - the credentials file of the CLI and the Go client (credfile.go).
//
// The package does no network or meta-service I/O: callers hand it what
// they read and store what it returns. Time and randomness are inputs
// where a test needs them to be.
package auth
