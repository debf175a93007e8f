package api

import (
	"net/http"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// MaxWatchWait bounds a watch's long poll.
const MaxWatchWait = 30 * time.Second

// WatchRequest asks for a space's committed changes after a cursor (or
// after a timestamp, or from now), waiting up to Wait seconds for one.
type WatchRequest struct {
	Space  string  `json:"space"`
	Cursor string  `json:"cursor,omitempty"`
	From   string  `json:"from,omitempty"`
	Limit  int     `json:"limit,omitempty"`
	Wait   float64 `json:"wait,omitempty"`
}

// WatchResponse is a page of changes in commit order: every version
// committed after the request's position up to closed is in events or in
// the pages that follow (more); cursor resumes after this page.
type WatchResponse struct {
	Events []WatchEvent `json:"events"`
	Cursor string       `json:"cursor"`
	Closed string       `json:"closed"`
	More   bool         `json:"more,omitempty"`
}

// WatchEvent is one committed version.
type WatchEvent struct {
	Key          string `json:"key"`
	Version      string `json:"version"`
	DeleteMarker bool   `json:"delete_marker,omitempty"`
}

func (q *call) watch(req *WatchRequest) (any, *ErrorBody) {
	from, e := optTS("from", req.From)
	if e != nil {
		return nil, e
	}
	if req.Wait < 0 || req.Wait > MaxWatchWait.Seconds() {
		return nil, &ErrorBody{Status: http.StatusBadRequest, Code: "InvalidArgument", Message: "wait is 0 to 30 seconds"}
	}
	if e := q.allow(req.Space, auth.Read); e != nil {
		return nil, e
	}
	w, ok := q.h.cfg.Service.(object.Watcher)
	if !ok {
		return nil, &ErrorBody{Status: http.StatusNotImplemented, Code: "NotImplemented", Message: "this server serves no watches"}
	}
	res, err := w.Watch(q.ctx, &object.WatchRequest{Space: req.Space, Cursor: req.Cursor, From: from, Limit: req.Limit,
		Wait: time.Duration(req.Wait * float64(time.Second))})
	if err != nil {
		return nil, serviceError(err)
	}
	out := WatchResponse{Events: make([]WatchEvent, 0, len(res.Events)), Cursor: res.Next, Closed: tstamp.String(res.Closed), More: res.More}
	for _, ev := range res.Events {
		out.Events = append(out.Events, WatchEvent{Key: ev.Key, Version: tstamp.String(ev.Version), DeleteMarker: ev.DeleteMarker})
	}
	return out, nil
}
