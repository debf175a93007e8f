package s3

import (
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// versionEntry is one <Version> or <DeleteMarker> of a ListVersionsResult;
// XMLName picks which, so the two interleave in key order as S3 lists
// them.
type versionEntry struct {
	XMLName      xml.Name
	Key          string       `xml:"Key"`
	VersionID    string       `xml:"VersionId"`
	IsLatest     bool         `xml:"IsLatest"`
	LastModified isoTimestamp `xml:"LastModified"`
	ETag         *quotedETag  `xml:"ETag,omitempty"`
	Size         *int64       `xml:"Size,omitempty"`
	Owner        owner        `xml:"Owner"`
	StorageClass string       `xml:"StorageClass,omitempty"`
}

type listVersionsResult struct {
	XMLName             xml.Name       `xml:"ListVersionsResult"`
	NS                  string         `xml:"xmlns,attr"`
	Name                string         `xml:"Name"`
	Prefix              string         `xml:"Prefix"`
	KeyMarker           string         `xml:"KeyMarker"`
	VersionIDMarker     string         `xml:"VersionIdMarker"`
	NextKeyMarker       string         `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string         `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int            `xml:"MaxKeys"`
	Delimiter           string         `xml:"Delimiter,omitempty"`
	EncodingType        string         `xml:"EncodingType,omitempty"`
	IsTruncated         bool           `xml:"IsTruncated"`
	Entries             []versionEntry `xml:""`
	CommonPrefixes      []commonPrefix `xml:"CommonPrefixes"`
}

// versionsPage is one page of ListObjectVersions: versions (newest first
// within a key) and common prefixes, in key order, at most max together.
type versionsPage struct {
	versions  []object.Info
	latest    []bool // versions[i] is its key's newest version
	prefixes  []string
	truncated bool
	// nextKey and nextVersion are where the next page starts after:
	// inside nextKey's history when nextVersion != 0.
	nextKey     string
	nextVersion uint64
}

// listVersions pages through every version in the bucket from after (and
// inside after's history below afterVersion, when that is set), folding
// keys that hold the delimiter after the prefix into common prefixes.
func (h *Handler) listVersions(q *request, lq listQuery, after string, afterVersion uint64) (versionsPage, error) {
	var p versionsPage
	if s := lq.startAfter(after); s != after {
		after, afterVersion = s, 0 // the marker is a common prefix
	}
	// A key's newest version is the first of its history listed; a page
	// that resumes inside a history starts below its newest.
	lastKey, lastSeen := after, afterVersion != 0
	// Only S3's view is listed (versioning.go); a page resuming inside a
	// history asks whether the key's newest null version went by.
	var shadow nullShadow
	if afterVersion != 0 {
		err := h.eachNull(q.r.Context(), q.bucket, after, func(v *object.Info) bool {
			shadow.seen = v.Version >= afterVersion
			return false
		})
		if err != nil && object.KindOf(err) != object.NotFound {
			return p, err
		}
	}
	n := 0
	req := object.ListRequest{Space: q.bucket, Prefix: lq.prefix, StartAfter: after, AfterVersion: afterVersion,
		Limit: maxListKeys, AllVersions: true}
	skipTo := "" // keys below it lie under a common prefix already listed
	for {
		res, err := h.cfg.Service.List(q.r.Context(), &req)
		if err != nil {
			return p, err
		}
		if p.versions == nil {
			n := min(lq.max, len(res.Objects))
			p.versions, p.latest = make([]object.Info, 0, n), make([]bool, 0, n)
		}
		for _, o := range res.Objects {
			if !strings.HasPrefix(o.Key, lq.prefix) || o.Key < req.StartAfter || o.Key < skipTo {
				continue
			}
			cp, folds := lq.commonPrefix(o.Key)
			newest := false
			if !folds {
				if newest = !(lastSeen && lastKey == o.Key); newest {
					shadow = nullShadow{}
				}
				lastKey, lastSeen = o.Key, true
				if hidden, _ := shadow.next(&o); hidden {
					continue
				}
			}
			if n == lq.max {
				p.truncated = true
				return p, nil
			}
			if folds {
				p.prefixes = append(p.prefixes, cp)
				n++
				// The rest of the prefix is skipped.
				p.nextKey, p.nextVersion = lq.startAfter(cp), 0
				lastKey, lastSeen = "", false
				skipTo = p.nextKey
				continue
			}
			p.versions = append(p.versions, o)
			p.latest = append(p.latest, newest)
			p.nextKey, p.nextVersion = o.Key, o.Version
			n++
		}
		if !res.Truncated {
			return p, nil
		}
		req.StartAfter, req.AfterVersion = res.Next, res.NextVersion
		if res.Next < skipTo {
			req.StartAfter, req.AfterVersion = skipTo, 0
		}
	}
}

func (h *Handler) listObjectVersions(q *request) {
	query := q.query
	lq, e := parseListQuery(q)
	if e != nil {
		q.fail(e)
		return
	}
	keyMarker, vidMarker := query.Get("key-marker"), query.Get("version-id-marker")
	var afterVersion uint64
	if vidMarker != "" {
		if keyMarker == "" {
			q.fail(errInvalidArgument.with("A version-id marker cannot be specified without a key marker."))
			return
		}
		if afterVersion, e = h.parseVersionID(q.r.Context(), q.bucket, keyMarker, vidMarker); e != nil {
			q.fail(e)
			return
		}
	}
	p, err := h.listVersions(q, lq, keyMarker, afterVersion)
	if err != nil {
		h.serviceError(q, err)
		return
	}
	esc := lq.esc
	res := listVersionsResult{NS: s3NS, Name: q.bucket, Prefix: esc(lq.prefix), KeyMarker: esc(keyMarker),
		VersionIDMarker: vidMarker, MaxKeys: lq.max, Delimiter: esc(lq.delimiter), EncodingType: lq.enc, IsTruncated: p.truncated}
	res.Entries = make([]versionEntry, 0, len(p.versions))
	for i := range p.versions {
		o := &p.versions[i]
		ve := versionEntry{Key: esc(o.Key), VersionID: versionIDOf(o), IsLatest: p.latest[i],
			LastModified: isoTimestamp(o.Modified), Owner: q.owner()}
		if o.DeleteMarker {
			ve.XMLName.Local = "DeleteMarker"
		} else {
			// ETag and Size point into p, which outlives res.
			ve.XMLName.Local, ve.ETag, ve.Size, ve.StorageClass = "Version", (*quotedETag)(&o.ETag), &o.Size, "STANDARD"
		}
		res.Entries = append(res.Entries, ve)
	}
	for _, cp := range p.prefixes {
		res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: esc(cp)})
	}
	if p.truncated {
		res.NextKeyMarker = esc(strings.TrimSuffix(p.nextKey, "\xff"))
		if p.nextVersion != 0 {
			res.NextVersionIDMarker = tstamp.String(p.nextVersion)
		}
	}
	writeXMLBody(q.w, http.StatusOK, res.appendXML(make([]byte, 0, res.sizeHint())))
}
