package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// trickyKeys are keys whose escaping in a listing can go wrong.
var trickyKeys = []string{
	"", "plain/key.txt", "a&b", "a&amp;b", "<tag>", "]]>", `"quoted"`, "it's", "a+b c%2F?#=;",
	"tab\there", "new\nline", "cr\rlf\n", "nul\x00", "\x01\x08\x0b\x0c\x1b\x1f", "del\x7f",
	"é漢字🙂", "\u00a0\u2028\u2029", "\uFFFD", "\uFFFE\uFFFF", "\U0010FFFF", "\uE000\uD7FF",
	"bad\xffutf8", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "dir/\xff", "%", "\\",
}

// xmlDoc is a listing document: encoding/xml and appendXML both encode it.
type xmlDoc interface {
	appendXML(b []byte) []byte
}

// listDocs returns listing documents in the shapes the handler builds
// (V1, V2, versions; with and without url encoding, owners, markers,
// truncation), with key, prefix, delimiter and markers taken from ss.
func listDocs(ss []string) []xmlDoc {
	at := func(i int) string { return ss[i%len(ss)] }
	lq := listQuery{enc: "url"}
	var docs []xmlDoc
	for i := range ss {
		ow := &owner{ID: at(i + 1), DisplayName: at(i + 2)}
		kc, size := i, int64(i)*1000-1
		marker := at(i + 3)
		etag := quotedETag(at(i + 2))
		objs := []listObject{
			{Key: at(i), LastModified: isoTimestamp(int64(i) * 1e9), ETag: quotedETag(at(i + 4)), Size: size, StorageClass: "STANDARD"},
			{Key: lq.esc(at(i)), LastModified: isoTimestamp(-int64(i) * 1e12), ETag: "etag", Size: 0, Owner: ow, StorageClass: "STANDARD"},
		}
		cps := []commonPrefix{{Prefix: at(i + 5)}, {Prefix: lq.esc(at(i + 5))}}
		docs = append(docs,
			&listBucketResult{NS: s3NS, Name: "bucket", Prefix: at(i), KeyCount: &kc, MaxKeys: 1000,
				ContinuationToken: at(i + 1), NextContinuationToken: at(i + 2), StartAfter: at(i + 3),
				Delimiter: at(i + 4), IsTruncated: i%2 == 0, Contents: objs, CommonPrefixes: cps},
			&listBucketResult{NS: s3NS, Name: at(i + 1), Prefix: lq.esc(at(i)), Marker: &marker, NextMarker: lq.esc(at(i + 2)),
				MaxKeys: i, Delimiter: lq.esc(at(i + 4)), EncodingType: "url", IsTruncated: true, Contents: objs[1:]},
			&listBucketResult{NS: at(i), Contents: objs[:1]},
			&listVersionsResult{NS: s3NS, Name: "bucket", Prefix: at(i), KeyMarker: at(i + 1), VersionIDMarker: at(i + 2),
				NextKeyMarker: at(i + 3), NextVersionIDMarker: at(i + 4), MaxKeys: -i, Delimiter: at(i + 5),
				EncodingType: at(i + 6), IsTruncated: i%2 == 1, CommonPrefixes: cps,
				Entries: []versionEntry{
					{XMLName: xml.Name{Local: "Version"}, Key: at(i), VersionID: at(i + 1), IsLatest: true,
						LastModified: isoTimestamp(int64(i) * 123456789e6), ETag: &etag, Size: &size, Owner: *ow, StorageClass: "STANDARD"},
					{XMLName: xml.Name{Local: "DeleteMarker"}, Key: lq.esc(at(i)), VersionID: "null",
						LastModified: isoTimestamp(math.MaxInt64 - int64(i)), Owner: owner{ID: at(i + 3)}},
				}},
			&listVersionsResult{NS: at(i)},
		)
	}
	return append(docs, &listBucketResult{}, &listVersionsResult{})
}

// TestListXMLMatchesEncodingXML: the hand-written encoders write what
// encoding/xml writes, byte for byte.
func TestListXMLMatchesEncodingXML(t *testing.T) {
	for i, doc := range listDocs(trickyKeys) {
		want, err := xml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if got := doc.appendXML([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("document %d (%T):\n got %q\nwant %q", i, doc, got, want)
		}
	}
}

func TestAppendEscaped(t *testing.T) {
	for _, s := range append(trickyKeys, strings.Repeat("a&\x00é", 100)) {
		var want bytes.Buffer
		if err := xml.EscapeText(&want, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got := appendEscaped(nil, s); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%q: got %q, want %q", s, got, want.Bytes())
		}
	}
}

func TestAppendISOTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []int64{0, -1, 1, 999999, 1e6, math.MinInt64, math.MaxInt64, 951782400e9 - 1, 951868800e9} // and 2000-02-29
	for range 10000 {
		cases = append(cases, int64(r.Uint64()))
	}
	for _, ns := range cases {
		want := time.Unix(0, ns).UTC().Format(isoLayout)
		if got := string(appendISOTime(nil, ns)); got != want {
			t.Fatalf("%d: got %s, want %s", ns, got, want)
		}
	}
}

// listService answers List from a fixed set of versions, sorted by key
// and newest first within one; Get finds nothing (the bucket has no
// settings); the other methods are not implemented.
type listService struct {
	object.Service
	versions []object.Info
}

func (s *listService) Get(context.Context, *object.GetRequest) (object.Info, io.ReadCloser, error) {
	return object.Info{}, nil, object.Errorf(object.NotFound, "no settings")
}

func (s *listService) List(_ context.Context, req *object.ListRequest) (object.ListResult, error) {
	i := sort.Search(len(s.versions), func(i int) bool {
		o := &s.versions[i]
		if req.AllVersions && req.AfterVersion != 0 && o.Key == req.StartAfter {
			return o.Version < req.AfterVersion
		}
		return o.Key > req.StartAfter
	})
	res := object.ListResult{Objects: make([]object.Info, 0, min(int(req.Limit), len(s.versions)-i))}
	for ; i < len(s.versions); i++ {
		o := s.versions[i]
		if !strings.HasPrefix(o.Key, req.Prefix) {
			continue
		}
		newest := i == 0 || s.versions[i-1].Key != o.Key
		if !req.AllVersions && (!newest || o.DeleteMarker) {
			continue // only each key's newest version, if live
		}
		if len(res.Objects) == int(req.Limit) {
			last := res.Objects[len(res.Objects)-1]
			res.Truncated, res.Next = true, last.Key
			if req.AllVersions {
				res.NextVersion = last.Version
			}
			break
		}
		res.Objects = append(res.Objects, o)
	}
	return res, nil
}

// listHandler is a Handler over a listService of keys (one version each,
// a second, older one for every other key) whose clock stands at now.
func listHandler(keys []string, now time.Time) *Handler {
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	svc := &listService{}
	for i, key := range keys {
		if i > 0 && key == keys[i-1] {
			continue
		}
		v := tstamp.Make(now.Add(-time.Duration(i)*time.Second).UnixMilli(), 0)
		svc.versions = append(svc.versions, object.Info{Key: key, Version: v, Size: 1024,
			ETag: "9b2cf535f27731c974343645a3985328", Modified: tstamp.Time(v).UnixNano()})
		if i%2 == 0 {
			svc.versions = append(svc.versions, object.Info{Key: key, Version: v - 1, DeleteMarker: true,
				Modified: tstamp.Time(v - 1).UnixNano()})
		}
	}
	return New(Config{Service: svc, Credentials: StaticCredentials{"AK": "secret"}, Now: func() time.Time { return now }})
}

// signedGet is a GET of target signed at now with listHandler's key.
func signedGet(t testing.TB, target string, now time.Time) *http.Request {
	return signEmpty(t, httptest.NewRequest(http.MethodGet, target, nil), "AK", "secret", now)
}

// TestListXMLKeys lists tricky keys through the Handler and decodes the
// documents as a client does: with encoding-type=url every key comes
// back exactly; without it, keys that XML can carry do.
func TestListXMLKeys(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var keys []string
	for _, k := range trickyKeys {
		if k != "" && !strings.ContainsRune(k, 0xFFFE) && utf8.ValidString(k) { // S3 keys are non-empty UTF-8
			keys = append(keys, k)
		}
	}
	h := listHandler(keys, now)
	sort.Strings(keys)
	type listed struct {
		Keys        []string `xml:"Contents>Key"`
		VersionKeys []string `xml:"Version>Key"`
		MarkerKeys  []string `xml:"DeleteMarker>Key"`
	}
	for _, query := range []string{"list-type=2", "list-type=2&fetch-owner=true", "", "versions"} {
		for _, enc := range []string{"", "url"} {
			q := query
			if enc != "" {
				q += "&encoding-type=" + enc
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, signedGet(t, "http://s3.local/bucket?"+q, now))
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/xml" {
				t.Fatalf("%s: %d %q: %s", q, w.Code, w.Header().Get("Content-Type"), w.Body)
			}
			body := w.Body.String()
			if !strings.HasPrefix(body, xml.Header) {
				t.Fatalf("%s: no XML declaration: %q", q, body)
			}
			var l listed
			if err := xml.Unmarshal(w.Body.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v\n%s", q, err, body)
			}
			got := l.Keys
			if query == "versions" {
				got = l.VersionKeys
				if len(l.MarkerKeys) != (len(keys)+1)/2 {
					t.Fatalf("%s: %d delete markers, want %d", q, len(l.MarkerKeys), (len(keys)+1)/2)
				}
			}
			if len(got) != len(keys) {
				t.Fatalf("%s: %d keys, want %d:\n%s", q, len(got), len(keys), body)
			}
			for i, k := range got {
				want := keys[i]
				if enc == "url" {
					var err error
					if k, err = url.QueryUnescape(k); err != nil {
						t.Fatalf("%s: key %d: %v", q, i, err)
					}
				} else if xmlSafe(want) {
					// Only keys XML can carry come back as they are.
				} else {
					continue
				}
				if k != want {
					t.Errorf("%s: key %d = %q, want %q", q, i, k, want)
				}
			}
		}
	}
}

// xmlSafe reports whether every rune of s is one XML 1.0 carries.
func xmlSafe(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0xFFFE || r == 0xFFFF {
			return false
		}
	}
	return true
}

// TestURLEncodingKeepsSlash: encoding-type=url percent-encodes as S3 does,
// leaving "/" as it is (clients compare common prefixes such as "foo/"
// with what they sent).
func TestURLEncodingKeepsSlash(t *testing.T) {
	lq := listQuery{enc: "url"}
	for in, want := range map[string]string{"foo/": "foo/", "foo+1/": "foo%2B1/", "quux ab/thud": "quux%20ab/thud", "a\nb": "a%0Ab", "é/x": "%C3%A9/x"} {
		if got := lq.esc(in); got != want {
			t.Errorf("esc(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestListMaxKeysZero: max-keys=0 lists nothing and is not truncated, as
// S3 answers it.
func TestListMaxKeysZero(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	h := listHandler([]string{"a", "b"}, now)
	for _, q := range []string{"list-type=2&max-keys=0", "max-keys=0"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signedGet(t, "http://s3.local/bucket?"+q, now))
		var res struct {
			IsTruncated bool
			Keys        []string `xml:"Contents>Key"`
		}
		if err := xml.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != http.StatusOK || res.IsTruncated || len(res.Keys) != 0 {
			t.Errorf("%s: %d truncated=%v keys=%v %v", q, w.Code, res.IsTruncated, res.Keys, err)
		}
	}
}

// TestContentEncodingKept: Content-Encoding is kept as sent, less the
// aws-chunked transfer coding.
func TestContentEncodingKept(t *testing.T) {
	for in, want := range map[string]string{"gzip": "gzip", "deflate, gzip": "deflate, gzip", "gzip, aws-chunked": "gzip",
		"aws-chunked, gzip": "gzip", "aws-chunked": "", "aws-chunked, aws-chunked": "", "deflate,aws-chunked,gzip": "deflate, gzip"} {
		got := contentHeaders(http.Header{"Content-Encoding": {in}})["content-encoding"]
		if got != want {
			t.Errorf("Content-Encoding %q kept as %q, want %q", in, got, want)
		}
	}
}
