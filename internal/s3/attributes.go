package s3

import (
	"cmp"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/object"
)

// getObjectAttributes is GetObjectAttributes: what x-amz-object-attributes
// names of a version (ETag, Checksum, ObjectParts, StorageClass,
// ObjectSize). A completed multipart upload lists its parts' sizes;
// their own checksums are not kept once the object is complete, so parts
// carry none.
func (h *Handler) getObjectAttributes(q *request) {
	want := map[string]bool{}
	for _, a := range strings.Split(strings.Join(q.r.Header.Values("X-Amz-Object-Attributes"), ","), ",") {
		if a = strings.TrimSpace(a); a != "" {
			switch a {
			case "ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize":
				want[a] = true
			default:
				q.fail(errInvalidArgument.with("Invalid attribute name specified: " + a + "."))
				return
			}
		}
	}
	if len(want) == 0 {
		q.fail(errInvalidRequest.with("x-amz-object-attributes names at least one of ETag, Checksum, ObjectParts, StorageClass, ObjectSize."))
		return
	}
	v, e := h.version(q)
	if e != nil {
		q.fail(e)
		return
	}
	ctx := q.r.Context()
	info, err := h.cfg.Service.Stat(ctx, &object.GetRequest{Space: q.bucket, Key: q.key, Version: v, Length: -1})
	if err != nil {
		h.objectError(q, v, err)
		return
	}
	if _, _, e := h.opening(ctx, info.Headers, q.r.Header, ownSSEC); e != nil {
		q.fail(e) // an SSE-C version's attributes need its key, as its reads do
		return
	}
	type partXML struct {
		PartNumber int
		Size       int64
		checksumXML
	}
	type partsXML struct {
		TotalPartsCount      int `xml:"PartsCount"`
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		Parts                []partXML `xml:"Part"`
	}
	type checksum struct {
		checksumXML
		ChecksumType string `xml:",omitempty"`
	}
	out := struct {
		XMLName      xml.Name  `xml:"http://s3.amazonaws.com/doc/2006-03-01/ GetObjectAttributesResponse"`
		ETag         string    `xml:",omitempty"`
		Checksum     *checksum `xml:",omitempty"`
		ObjectParts  *partsXML `xml:",omitempty"`
		StorageClass string    `xml:",omitempty"`
		ObjectSize   *int64    `xml:",omitempty"`
	}{}
	if want["ETag"] {
		out.ETag = info.ETag
	}
	if want["StorageClass"] {
		out.StorageClass = "STANDARD"
	}
	if want["ObjectSize"] {
		out.ObjectSize = &info.Size
	}
	if want["Checksum"] {
		if c := storedChecksums(info.Headers); c != (checksumXML{}) {
			typ := cmp.Or(info.Headers[checksumTypeHeader], checksumFullObject)
			if typ == checksumComposite {
				// GetObjectAttributes gives a composite checksum without
				// its "-PARTS" suffix: the parts are counted beside it.
				for _, a := range checksumAlgs {
					f := c.field(a)
					*f, _, _ = strings.Cut(*f, "-")
				}
			}
			out.Checksum = &checksum{c, typ}
		}
	}
	if s := info.Headers[partSizesHeader]; want["ObjectParts"] && s != "" {
		max, marker := 1000, 0
		if m := q.r.Header.Get("X-Amz-Max-Parts"); m != "" {
			if n, err := strconv.Atoi(m); err == nil && n >= 0 && n < max {
				max = n
			}
		}
		if m := q.r.Header.Get("X-Amz-Part-Number-Marker"); m != "" {
			marker, _ = strconv.Atoi(m)
		}
		sizes, ok := partSizes(s)
		if !ok {
			q.fail(errInternal)
			return
		}
		sumAlg, sums, sumsOK := partChecksums(info.Headers)
		p := &partsXML{TotalPartsCount: len(sizes), PartNumberMarker: marker, MaxParts: max, Parts: []partXML{}}
		for n := marker + 1; n <= len(sizes); n++ {
			if len(p.Parts) == max {
				p.IsTruncated = true
				break
			}
			px := partXML{PartNumber: n, Size: sizes[n-1]}
			if sumsOK && n <= len(sums) {
				*px.field(sumAlg) = sums[n-1]
			}
			p.Parts = append(p.Parts, px)
			p.NextPartNumberMarker = n
		}
		out.ObjectParts = p
	}
	hd := q.w.Header()
	hd.Set("Last-Modified", time.Unix(0, info.Modified).UTC().Format(http.TimeFormat))
	h.setVersionID(q.r.Context(), hd, q.bucket, &info)
	writeXML(q.w, http.StatusOK, out)
}
