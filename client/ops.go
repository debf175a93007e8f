package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// CreateSpace creates a space. ErrSpaceExists if it exists, ErrBadSpaceName
// if the name is invalid.
func (c *Client) CreateSpace(ctx context.Context, name string, s SpaceSettings) (SpaceInfo, error) {
	var info SpaceInfo
	err := c.do(ctx, false, nil, func(cn *wire.Conn) (err error) {
		info, err = cn.CreateSpace(ctx, name, s)
		return err
	})
	return info, err
}

// ListSpaces lists spaces in name order.
func (c *Client) ListSpaces(ctx context.Context) ([]SpaceInfo, error) {
	var l []SpaceInfo
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		l, err = cn.ListSpaces(ctx)
		return err
	})
	return l, err
}

// DeleteSpace deletes an empty space: ErrSpaceNotEmpty if it holds a live
// object, ErrSpaceNotFound if it does not exist.
func (c *Client) DeleteSpace(ctx context.Context, name string) error {
	return c.do(ctx, false, nil, func(cn *wire.Conn) error { return cn.DeleteSpace(ctx, name) })
}

func (c *Client) putBytes(ctx context.Context, req *object.PutRequest, data []byte) (ObjectInfo, error) {
	var info ObjectInfo
	err := c.doKey(ctx, req.Space, req.Key, false, nil, func(cn *wire.Conn) (err error) {
		info, err = cn.PutBytes(ctx, req, data)
		return err
	})
	return info, err
}

// Put writes data as a new version of key. data is not copied and must not
// change until Put returns.
func (c *Client) Put(ctx context.Context, space, key string, data []byte, opts ...PutOption) (ObjectInfo, error) {
	req := putRequest(space, key, int64(len(data)), opts)
	return c.putBytes(ctx, &req, data)
}

// PutStream writes a new version from r, streaming it in frames. size is
// the body's length, or -1 if unknown (r is read to EOF). If r ends before
// size bytes, nothing is written and the error is ErrTruncated. Memory use
// is a few frames whatever the size.
func (c *Client) PutStream(ctx context.Context, space, key string, r io.Reader, size int64, opts ...PutOption) (ObjectInfo, error) {
	req := putRequest(space, key, size, opts)
	cr := &countingReader{r: r}
	var info ObjectInfo
	err := c.doKey(ctx, space, key, false, func() bool { return cr.n == 0 }, func(cn *wire.Conn) (err error) {
		info, err = cn.Put(ctx, &req, cr)
		return err
	})
	return info, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// WriteAt writes a new version equal to the latest one with
// [off, off+len(data)) overwritten (growing it if needed; a gap reads as
// zeros). Unchanged chunks are shared with the parent version. Options
// (conditions, metadata, tags, content type) apply as for Put; metadata,
// tags and content type not given are kept from the parent.
func (c *Client) WriteAt(ctx context.Context, space, key string, off int64, data []byte, opts ...PutOption) (ObjectInfo, error) {
	req := object.PutRequest{Space: space, Key: key, Mode: object.PutWriteAt, Offset: off, Size: int64(len(data))}
	for _, o := range opts {
		o.applyPut(&req)
	}
	return c.putBytes(ctx, &req, data)
}

// Append writes a new version equal to the latest one followed by data.
// Options apply as for WriteAt.
func (c *Client) Append(ctx context.Context, space, key string, data []byte, opts ...PutOption) (ObjectInfo, error) {
	req := object.PutRequest{Space: space, Key: key, Mode: object.PutAppend, Size: int64(len(data))}
	for _, o := range opts {
		o.applyPut(&req)
	}
	return c.putBytes(ctx, &req, data)
}

func (c *Client) getBytes(ctx context.Context, req *object.GetRequest) ([]byte, ObjectInfo, error) {
	var (
		info ObjectInfo
		data []byte
	)
	err := c.doKey(ctx, req.Space, req.Key, true, nil, func(cn *wire.Conn) (err error) {
		info, data, err = cn.GetBytes(ctx, req)
		return err
	})
	return data, info, err
}

// Get reads the latest version of key (or the one WithVersion / WithAsOf
// select) into memory. Use GetStream for large objects.
func (c *Client) Get(ctx context.Context, space, key string, opts ...GetOption) ([]byte, ObjectInfo, error) {
	req := getRequest(space, key, opts)
	return c.getBytes(ctx, &req)
}

// ReadRange reads length bytes at off (length -1: to the end).
// ErrInvalidRange if off lies past the end.
func (c *Client) ReadRange(ctx context.Context, space, key string, off, length int64, opts ...GetOption) ([]byte, ObjectInfo, error) {
	req := getRequest(space, key, opts)
	req.Offset, req.Length = off, length
	return c.getBytes(ctx, &req)
}

// GetStream opens a version for streaming. Bytes arrive as the reader is
// read, a few frames ahead; the caller must Close it (closing early
// cancels the transfer). A reader that is not drained holds back the
// other requests of its connection, so read it promptly. Only the opening
// is retried; a failure mid-stream is returned by Read.
func (c *Client) GetStream(ctx context.Context, space, key string, opts ...GetOption) (io.ReadCloser, ObjectInfo, error) {
	req := getRequest(space, key, opts)
	var (
		info ObjectInfo
		rc   io.ReadCloser
	)
	err := c.doKey(ctx, space, key, true, nil, func(cn *wire.Conn) (err error) {
		info, rc, err = cn.Get(ctx, &req)
		return err
	})
	return rc, info, err
}

// Stat returns a version's info without its bytes.
func (c *Client) Stat(ctx context.Context, space, key string, opts ...GetOption) (ObjectInfo, error) {
	req := getRequest(space, key, opts)
	var info ObjectInfo
	err := c.doKey(ctx, space, key, true, nil, func(cn *wire.Conn) (err error) {
		info, err = cn.Stat(ctx, &req)
		return err
	})
	return info, err
}

// Delete writes a delete marker for key, or with WithVersion removes that
// one version. It returns the marker's (or the removed version's) info.
func (c *Client) Delete(ctx context.Context, space, key string, opts ...DeleteOption) (ObjectInfo, error) {
	req := deleteRequest(space, key, opts)
	var info ObjectInfo
	err := c.doKey(ctx, space, key, false, nil, func(cn *wire.Conn) (err error) {
		info, err = cn.Delete(ctx, &req)
		return err
	})
	return info, err
}

// List returns one page of live objects in key order (or, with
// o.AllVersions, of every version).
func (c *Client) List(ctx context.Context, space string, o ListOptions) (ListResult, error) {
	req := object.ListRequest{Space: space, Prefix: o.Prefix, StartAfter: o.StartAfter, Limit: o.Limit, AsOf: o.AsOf,
		AllVersions: o.AllVersions, AfterVersion: o.AfterVersion}
	var res ListResult
	err := c.do(ctx, true, nil, func(cn *wire.Conn) (err error) {
		res, err = cn.List(ctx, &req)
		return err
	})
	return res, err
}

// ListAll iterates over every live object matching o, fetching pages of
// o.Limit as it goes. An error ends the iteration after being yielded.
func (c *Client) ListAll(ctx context.Context, space string, o ListOptions) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		for {
			res, err := c.List(ctx, space, o)
			if err != nil {
				yield(ObjectInfo{}, err)
				return
			}
			for _, obj := range res.Objects {
				if !yield(obj, nil) {
					return
				}
			}
			if !res.Truncated || res.Next == "" {
				return
			}
			o.StartAfter, o.AfterVersion = res.Next, res.NextVersion
		}
	}
}

// Versions returns one page of the versions of key, newest first, delete
// markers included.
func (c *Client) Versions(ctx context.Context, space, key string, o VersionsOptions) (VersionsResult, error) {
	req := object.VersionsRequest{Space: space, Key: key, Before: o.Before, Limit: o.Limit}
	var res VersionsResult
	err := c.doKey(ctx, space, key, true, nil, func(cn *wire.Conn) (err error) {
		res, err = cn.Versions(ctx, &req)
		return err
	})
	return res, err
}

// Batch starts a batch: small operations sent in one frame and run by the
// server in order, each succeeding or failing alone (a batch is not a
// transaction). The whole request and answer must each fit in one frame
// (1 MiB by default); a Get whose bytes do not fit fails with ErrTooLarge.
func (c *Client) Batch(ctx context.Context) *Batch {
	return &Batch{c: c, ctx: ctx}
}

// Batch collects operations for one round trip. It is not safe for
// concurrent use.
type Batch struct {
	c     *Client
	ctx   context.Context // the batch's; lives as long as it
	items []wire.BatchItem
}

// BatchResult is the outcome of one batch item.
type BatchResult struct {
	Op   BatchOp
	Info ObjectInfo
	Data []byte // Get only
	Err  error  // nil on success
}

// Put adds a write of data (not copied; keep it unchanged until Do returns).
func (b *Batch) Put(space, key string, data []byte, opts ...PutOption) *Batch {
	b.items = append(b.items, wire.BatchItem{Op: wire.BatchPut, Put: putRequest(space, key, int64(len(data)), opts), Body: data})
	return b
}

// Get adds a read of a whole version.
func (b *Batch) Get(space, key string, opts ...GetOption) *Batch {
	b.items = append(b.items, wire.BatchItem{Op: wire.BatchGet, Get: getRequest(space, key, opts)})
	return b
}

// Stat adds a stat.
func (b *Batch) Stat(space, key string, opts ...GetOption) *Batch {
	b.items = append(b.items, wire.BatchItem{Op: wire.BatchStat, Get: getRequest(space, key, opts)})
	return b
}

// Delete adds a delete.
func (b *Batch) Delete(space, key string, opts ...DeleteOption) *Batch {
	b.items = append(b.items, wire.BatchItem{Op: wire.BatchDelete, Delete: deleteRequest(space, key, opts)})
	return b
}

// Len is the number of operations added.
func (b *Batch) Len() int { return len(b.items) }

// Do sends the batch and returns one result per operation, in order. The
// error is non-nil only when the batch as a whole failed.
func (b *Batch) Do() ([]BatchResult, error) {
	if len(b.items) == 0 {
		return nil, nil
	}
	idempotent := true
	for _, it := range b.items {
		if it.Op == wire.BatchPut || it.Op == wire.BatchDelete {
			idempotent = false
		}
	}
	var rs []wire.BatchResult
	err := b.c.do(b.ctx, idempotent, nil, func(cn *wire.Conn) (err error) {
		rs, err = cn.Batch(b.ctx, b.items)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]BatchResult, len(rs))
	for i := range rs {
		out[i] = BatchResult{Op: rs[i].Op, Info: rs[i].Info, Data: rs[i].Data, Err: rs[i].Err()}
	}
	return out, nil
}

// ClusterStatus returns the answering node's report of its cluster: nodes,
// meta service members and ranges.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterReport, error) {
	var rep ClusterReport
	err := c.do(ctx, true, nil, func(cn *wire.Conn) error {
		b, err := cn.ClusterStatus(ctx)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("client: malformed cluster report: %w", err)
		}
		return nil
	})
	return rep, err
}

// DrainNode marks node id draining: the cluster moves its range replicas,
// leases and chunk copies to other nodes. It returns at once; watch
// ClusterStatus (the node's Replicas count falls to 0).
func (c *Client) DrainNode(ctx context.Context, id uint64) error {
	return c.do(ctx, true, nil, func(cn *wire.Conn) error { return cn.NodeAdmin(ctx, wire.NodeDrain, id) })
}

// UndrainNode takes a draining node back into service: new chunks and
// range replicas may go to it again.
func (c *Client) UndrainNode(ctx context.Context, id uint64) error {
	return c.do(ctx, true, nil, func(cn *wire.Conn) error { return cn.NodeAdmin(ctx, wire.NodeUndrain, id) })
}

// RemoveNode takes node id out of the cluster for good, with its meta
// service member. The node must be drained (or down): until it is, the
// error has code wire.CodeNotDrained and says what is left.
func (c *Client) RemoveNode(ctx context.Context, id uint64) error {
	return c.do(ctx, true, nil, func(cn *wire.Conn) error { return cn.NodeAdmin(ctx, wire.NodeRemove, id) })
}

// CreateKey makes an S3 access key with k's grants (permissions "read",
// "write" or "admin" by space name, "*" for every space); an empty Access
// or Secret is made up. The answer holds the secret: it is not shown again.
func (c *Client) CreateKey(ctx context.Context, k wire.KeySpec) (wire.KeySpec, error) {
	body, err := json.Marshal(k)
	if err != nil {
		return wire.KeySpec{}, err
	}
	var made wire.KeySpec
	err = c.do(ctx, false, nil, func(cn *wire.Conn) error {
		b, err := cn.Keys(ctx, wire.KeyCreate, body)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &made)
	})
	return made, err
}

// ListKeys lists the S3 access keys other than the root key, without
// their secrets.
func (c *Client) ListKeys(ctx context.Context) ([]wire.KeySpec, error) {
	var keys []wire.KeySpec
	err := c.do(ctx, true, nil, func(cn *wire.Conn) error {
		b, err := cn.Keys(ctx, wire.KeyList, nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &keys)
	})
	return keys, err
}

// CreateKMSKey makes a key of the cluster's KMS under id, with fresh
// random material that never leaves the cluster: S3 requests name it in
// x-amz-server-side-encryption-aws-kms-key-id (SSE-KMS).
func (c *Client) CreateKMSKey(ctx context.Context, id string) (wire.KMSKeySpec, error) {
	var made wire.KMSKeySpec
	err := c.do(ctx, false, nil, func(cn *wire.Conn) error {
		b, err := cn.Keys(ctx, wire.KeyKMSCreate, []byte(id))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &made)
	})
	return made, err
}

// ListKMSKeys lists the cluster's KMS keys (ids, never material).
func (c *Client) ListKMSKeys(ctx context.Context) ([]wire.KMSKeySpec, error) {
	var keys []wire.KMSKeySpec
	err := c.do(ctx, true, nil, func(cn *wire.Conn) error {
		b, err := cn.Keys(ctx, wire.KeyKMSList, nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &keys)
	})
	return keys, err
}

// DeleteKey removes an S3 access key; requests signed with it are refused
// from then on (on every node within a second).
func (c *Client) DeleteKey(ctx context.Context, access string) error {
	return c.do(ctx, true, nil, func(cn *wire.Conn) error {
		_, err := cn.Keys(ctx, wire.KeyDelete, []byte(access))
		return err
	})
}

// CreateToken makes a join token: a new node joins the cluster with it
// (cairn server --join ADDR --token TOKEN). ttl 0 is an hour; uses 0 is
// one node. The answer's Token holds the secret: it is not shown again.
func (c *Client) CreateToken(ctx context.Context, ttl time.Duration, uses int) (wire.TokenSpec, error) {
	body, err := json.Marshal(wire.TokenSpec{TTLSeconds: int64(ttl / time.Second), Uses: uses})
	if err != nil {
		return wire.TokenSpec{}, err
	}
	var made wire.TokenSpec
	err = c.do(ctx, false, nil, func(cn *wire.Conn) error {
		b, err := cn.Tokens(ctx, wire.TokenCreate, body)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &made)
	})
	return made, err
}

// ListTokens lists the join tokens that may still be used, without their
// secrets.
func (c *Client) ListTokens(ctx context.Context) ([]wire.TokenSpec, error) {
	var ts []wire.TokenSpec
	err := c.do(ctx, true, nil, func(cn *wire.Conn) error {
		b, err := cn.Tokens(ctx, wire.TokenList, nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &ts)
	})
	return ts, err
}

// RevokeToken removes a join token by its id.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, true, nil, func(cn *wire.Conn) error {
		_, err := cn.Tokens(ctx, wire.TokenRevoke, []byte(id))
		return err
	})
}

// RotateRootKey replaces the cluster's root key (which must be the saved
// one, not one given in the nodes' configuration) and returns the new one
// with its secret: it is not shown again. The old one stops working
// within a second.
func (c *Client) RotateRootKey(ctx context.Context) (wire.KeySpec, error) {
	var k wire.KeySpec
	err := c.do(ctx, false, nil, func(cn *wire.Conn) error {
		b, err := cn.Keys(ctx, wire.KeyRotateRoot, nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &k)
	})
	return k, err
}

// RotateClusterKey makes a new cluster key, hands it to every node (all
// must be up) and seals every secret of the meta service under it.
func (c *Client) RotateClusterKey(ctx context.Context) (wire.ClusterKeyRotation, error) {
	var r wire.ClusterKeyRotation
	err := c.do(ctx, false, nil, func(cn *wire.Conn) error {
		b, err := cn.Keys(ctx, wire.KeyRotateCluster, nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &r)
	})
	return r, err
}
