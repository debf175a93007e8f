package s3

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

// Bucket documents: settings kept whole, as the document that set them
// (encryption, policy, ACL, object lock, ...), each the body of the
// system key cfgPrefix+NAME in the bucket's space. Every node reads one
// at most every configTTL (as S3, a change applies after a short delay;
// the node that made it applies it at once).
const (
	cfgPrefix = object.SystemKeyPrefix + "cfg/"
	configTTL = 2 * time.Second
	// maxConfigDoc bounds a stored document (S3's bucket policy limit is
	// 20 KiB; the others are smaller).
	maxConfigDoc = 64 << 10
)

type configCache struct {
	mu sync.Mutex
	m  map[string]configEntry // by bucket + "\x00" + name
}

type configEntry struct {
	doc []byte // nil: none
	at  time.Time
}

// config returns the bucket's document name, or nil if it has none.
func (h *Handler) config(ctx context.Context, bucket, name string) ([]byte, error) {
	now := time.Now()
	ck := bucket + "\x00" + name
	c := &h.configs
	c.mu.Lock()
	e, ok := c.m[ck]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < configTTL {
		return e.doc, nil
	}
	doc, err := h.readSystemDoc(ctx, bucket, cfgPrefix+name)
	if err != nil {
		return nil, err
	}
	h.setConfigCache(ck, doc, now)
	return doc, nil
}

// readSystemDoc returns the body of a system key of the bucket, or nil if
// there is none.
func (h *Handler) readSystemDoc(ctx context.Context, bucket, key string) ([]byte, error) {
	_, rc, err := h.cfg.Service.Get(object.WithSystemKeys(ctx), &object.GetRequest{Space: bucket, Key: key, Length: -1})
	switch k := object.KindOf(err); {
	case k == object.NotFound || k == object.Deleted:
		return nil, nil
	case err != nil:
		return nil, err
	}
	defer rc.Close()
	doc, err := io.ReadAll(io.LimitReader(rc, maxConfigDoc+1))
	if err != nil {
		return nil, err
	}
	if doc == nil {
		doc = []byte{}
	}
	return doc, nil
}

// writeSystemDoc sets the body of a system key of the bucket (nil:
// deletes the key).
func (h *Handler) writeSystemDoc(ctx context.Context, bucket, key string, doc []byte) error {
	ctx = object.WithSystemKeys(ctx)
	if doc != nil {
		_, err := h.cfg.Service.Put(ctx, &object.PutRequest{Space: bucket, Key: key, Size: int64(len(doc))}, object.MemBody(doc))
		return err
	}
	_, err := h.cfg.Service.Delete(ctx, &object.DeleteRequest{Space: bucket, Key: key})
	if k := object.KindOf(err); k == object.NotFound || k == object.Deleted {
		err = nil
	}
	return err
}

func (h *Handler) setConfigCache(ck string, doc []byte, now time.Time) {
	c := &h.configs
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]configEntry{}
	}
	c.m[ck] = configEntry{doc, now}
	c.mu.Unlock()
}

// putConfig saves the bucket's document name (nil: removes it).
func (h *Handler) putConfig(ctx context.Context, bucket, name string, doc []byte) error {
	err := h.writeSystemDoc(ctx, bucket, cfgPrefix+name, doc)
	if err == nil {
		h.setConfigCache(bucket+"\x00"+name, doc, time.Now())
	}
	return err
}

// configDoc serves GET, PUT and DELETE of a bucket document: parse
// validates a PUT's body and returns the document to keep; missing is
// the error of a GET when there is none.
func (h *Handler) configDoc(q *request, name string, missing *apiError, parse func([]byte) ([]byte, *apiError)) {
	if !h.exists(q) {
		return
	}
	ctx := q.r.Context()
	switch q.r.Method {
	case http.MethodGet:
		doc, err := h.config(ctx, q.bucket, name)
		if err != nil {
			h.serviceError(q, err)
			return
		}
		if doc == nil {
			q.fail(missing)
			return
		}
		writeXMLBody(q.w, http.StatusOK, doc)
	case http.MethodPut:
		body, e := readXMLBytes(q, maxConfigDoc)
		if e != nil {
			q.fail(e)
			return
		}
		doc, e := parse(body)
		if e != nil {
			q.fail(e)
			return
		}
		if err := h.putConfig(ctx, q.bucket, name, doc); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusOK)
	case http.MethodDelete:
		if err := h.putConfig(ctx, q.bucket, name, nil); err != nil {
			h.serviceError(q, err)
			return
		}
		q.w.WriteHeader(http.StatusNoContent)
	default:
		q.fail(errMethodNotAllowed)
	}
}
