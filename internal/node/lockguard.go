package node

import (
	"context"

	"github.com/cairn-db/cairn/internal/object"
)

// lockGuard is the node's service as Cairn's own API uses it (the native
// protocol, the JSON API, the console): S3's object lock holds there too.
// A version under a legal hold or an unexpired retention is not removed,
// a bucket holding such versions is not dropped, and a bucket with object
// lock keeps retention all (internal/s3/lock.go). Every other method is
// the node's own.
type lockGuard struct{ *Node }

func (g lockGuard) Delete(ctx context.Context, req *object.DeleteRequest) (object.Info, error) {
	if req.Version != 0 {
		if err := g.s3api.CheckRemoveVersion(ctx, req.Space, req.Key, req.Version); err != nil {
			return object.Info{}, err
		}
	}
	return g.Node.Delete(ctx, req)
}

func (g lockGuard) DeleteSpace(ctx context.Context, name string) error {
	if err := g.s3api.CheckDropSpace(ctx, name); err != nil {
		return err
	}
	return g.Node.DeleteSpace(ctx, name)
}

func (g lockGuard) SetRetention(ctx context.Context, name string, s object.SpaceSettings) (object.SpaceInfo, error) {
	if err := g.s3api.CheckRetention(ctx, name, s); err != nil {
		return object.SpaceInfo{}, err
	}
	return g.Node.SetRetention(ctx, name, s)
}
