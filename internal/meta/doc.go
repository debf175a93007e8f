// Package meta is the meta service: the cluster's control-plane state kept
// in embedded etcd, reached only through the small Store interface.
//
// It holds the timestamp oracle (Oracle), the space catalog and the range
// table (Catalog). EtcdStore runs an etcd member in-process (one member on a
// single node; 3 or 5 voters as a cluster grows) and talks to it through an
// in-process client; MemStore is a map for tests. Both give per-key
// revisions, compare-and-swap writes and a lease-backed leadership.
//
// # Keys
//
// Everything lives under "/cairn/". Values are JSON objects with a "v"
// format version (1 today); 64-bit numbers are JSON strings so that readers
// with float64 numbers do not lose precision. Integrity is etcd's (CRCs on
// its WAL and backend pages).
//
//	/cairn/tso                         {"v":1,"high":"<ts>","time":"<RFC 3339>"}
//	                                   the TSO high-water mark H: every timestamp
//	                                   ever handed out is below it
//	/cairn/leader/<name>               the holder's member name, attached to its
//	                                   lease ("tso" is the oracle's)
//	/cairn/counters/space              {"v":1,"last":"<n>"} last space ID handed out
//	/cairn/counters/range              {"v":1,"last":"<n>"} last range ID handed out
//	/cairn/counters/node               {"v":1,"last":"<n>"} last node ID handed out
//	/cairn/nodes/<node %016x>          {"v":1,"id":"<n>","native":..,"peer":..,"http":..,
//	                                    "meta_peer_url":..,"zone":..,"capacity":"<n>",
//	                                    "state":"up"|..,"started":..} the cluster map
//	/cairn/spaces/<name>               {"v":1,"id":..,"name":..,"created":..,
//	                                    "settings":{..},"state":"active"|"fencing"|"deleting",
//	                                    "state_since":..}
//	/cairn/rootkey                     {"v":1,"access":..,"secret":..} the S3 root
//	                                   key, when the configuration gives none
//	/cairn/keys/<access key id>        {"v":1,"access":..,"secret":..,"grants":{<space>|"*":
//	                                    "read"|"write"|"admin"},"created":..} S3 keys
//	/cairn/ranges/<space %08x>/<range %016x>
//	                                   {"v":1,"id":"<n>","space_id":..,"start":<b64>,
//	                                    "end":<b64>|null,"replicas":[..],"epoch":"<n>"}
//	/cairn/layouts/<space %08x>        {"v":1,"ranges":[<range record>..],"done":true}
//	                                   a space's first ranges, claimed in one write
//	                                   before any is made (CreatePlacedRanges)
//
// IDs are allocated by compare-and-swap on the counter keys and never reused.
// Writes that read first (state changes, ID allocation) are compare-and-swap
// on the key's revision, so any number of nodes may call the Catalog.
//
// # The timestamp oracle
//
// The oracle is PD's design. Its guarantees: timestamps are strictly
// increasing, and each is above every timestamp handed out before it in real
// time, by this oracle or any earlier leader, across restarts and across a
// clock that goes backwards. The argument:
//
//  1. One leader at a time. Start campaigns for leadership "tso": a key
//     /cairn/leader/tso created only if absent and attached to a lease. The
//     key disappears only when its holder resigns or its lease expires.
//  2. Persist before serving. A new leader reads H from /cairn/tso and writes
//     H' = ms(max(now, H)) + Window (a compare-and-swap on the revision it
//     read) before handing out anything. It hands out only t with
//     max(H, last+1, now) <= t < H'. Renewals raise H ahead of use (when a
//     third of the window is used) with the same compare-and-swap, so every
//     timestamp ever handed out is below the stored H: a restart, or a new
//     leader, starts above all of them whatever its clock says.
//  3. Serve only under a valid lease. A timestamp is handed out only while
//     Clock() < ValidUntil, and ValidUntil is the local time the lease grant
//     or keepalive was sent plus the TTL minus a margin (TTL/10). The lease
//     cannot expire at etcd before that point unless etcd's clock runs more
//     than 10% faster than ours (etcd only ever expires leases late: they
//     are refreshed on an etcd leader change). So the old leader has stopped
//     serving before its key can vanish, and a new leader, which can only win
//     after that, hands out timestamps (>= the H it read, above everything
//     the old one served) strictly later in real time. Without step 3 an
//     isolated old leader could hand out a timestamp below one the new
//     leader already handed out.
//  4. Fencing. Should an old leader's write race a new leader's, the
//     compare-and-swap on /cairn/tso fails for one of them: the new leader
//     re-reads H (Start retries), and an old one stops serving for good.
//
// The fast path of Next is a mutex, a clock read and arithmetic; only an
// exhausted window (a burst that outran the renewal, or the clock jumping
// forward past H) makes Next wait for a store write.
package meta
