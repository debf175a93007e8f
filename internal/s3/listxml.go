package s3

import (
	"strconv"
	"unicode/utf8"
)

// The listing documents, ListBucketResult (ListObjects V1 and V2) and
// ListVersionsResult, are encoded by hand: for a page of 1,000 keys,
// encoding/xml's reflection cost more than reading the keys. appendXML
// writes exactly the bytes xml.Marshal writes for the same struct, so the
// struct and its tags remain the definition of the document; the tests
// compare the two encoders on tricky keys, and a fuzz target on any.

// isoTimestamp is a time, in nanoseconds since the epoch, that encodes as
// S3 writes times (isoLayout, in UTC).
type isoTimestamp int64

// MarshalText implements encoding.TextMarshaler.
func (t isoTimestamp) MarshalText() ([]byte, error) { return appendISOTime(nil, int64(t)), nil }

// quotedETag is an entity tag that encodes in quotes, as S3 writes it.
type quotedETag string

// MarshalText implements encoding.TextMarshaler.
func (e quotedETag) MarshalText() ([]byte, error) { return []byte(`"` + e + `"`), nil }

// appendXML appends r as xml.Marshal encodes it.
func (r *listBucketResult) appendXML(b []byte) []byte {
	b = appendStartNS(b, "ListBucketResult", r.NS)
	b = appendElem(b, "Name", r.Name)
	b = appendElem(b, "Prefix", r.Prefix)
	if r.Marker != nil {
		b = appendElem(b, "Marker", *r.Marker)
	}
	b = appendElemOmitEmpty(b, "NextMarker", r.NextMarker)
	if r.emptyToken {
		b = appendElem(b, "ContinuationToken", "")
	} else {
		b = appendElemOmitEmpty(b, "ContinuationToken", r.ContinuationToken)
	}
	b = appendElemOmitEmpty(b, "NextContinuationToken", r.NextContinuationToken)
	b = appendElemOmitEmpty(b, "StartAfter", r.StartAfter)
	if r.KeyCount != nil {
		b = appendIntElem(b, "KeyCount", int64(*r.KeyCount))
	}
	b = appendIntElem(b, "MaxKeys", int64(r.MaxKeys))
	b = appendElemOmitEmpty(b, "Delimiter", r.Delimiter)
	b = appendElemOmitEmpty(b, "EncodingType", r.EncodingType)
	b = appendBoolElem(b, "IsTruncated", r.IsTruncated)
	for i := range r.Contents {
		o := &r.Contents[i]
		b = append(b, "<Contents>"...)
		b = appendElem(b, "Key", o.Key)
		b = appendTimeElem(b, "LastModified", o.LastModified)
		b = appendETagElem(b, o.ETag)
		b = appendIntElem(b, "Size", o.Size)
		if o.Owner != nil {
			b = o.Owner.appendXML(b)
		}
		b = appendElem(b, "StorageClass", o.StorageClass)
		b = append(b, "</Contents>"...)
	}
	b = appendCommonPrefixes(b, r.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

// sizeHint is about the length of r's encoding, so that one allocation
// holds it.
func (r *listBucketResult) sizeHint() int {
	n := 1024 + len(r.Prefix) + len(r.ContinuationToken) + len(r.StartAfter)
	for i := range r.Contents {
		n += 200 + len(r.Contents[i].Key) + len(r.Contents[i].ETag)
		if r.Contents[i].Owner != nil {
			n += 60 + 2*len(r.Contents[i].Owner.ID)
		}
	}
	for _, p := range r.CommonPrefixes {
		n += 50 + len(p.Prefix)
	}
	return n
}

// appendXML appends r as xml.Marshal encodes it.
func (r *listVersionsResult) appendXML(b []byte) []byte {
	b = appendStartNS(b, "ListVersionsResult", r.NS)
	b = appendElem(b, "Name", r.Name)
	b = appendElem(b, "Prefix", r.Prefix)
	b = appendElem(b, "KeyMarker", r.KeyMarker)
	b = appendElem(b, "VersionIdMarker", r.VersionIDMarker)
	b = appendElemOmitEmpty(b, "NextKeyMarker", r.NextKeyMarker)
	b = appendElemOmitEmpty(b, "NextVersionIdMarker", r.NextVersionIDMarker)
	b = appendIntElem(b, "MaxKeys", int64(r.MaxKeys))
	b = appendElemOmitEmpty(b, "Delimiter", r.Delimiter)
	b = appendElemOmitEmpty(b, "EncodingType", r.EncodingType)
	b = appendBoolElem(b, "IsTruncated", r.IsTruncated)
	for i := range r.Entries {
		e := &r.Entries[i]
		// XMLName picks the element: Version or DeleteMarker.
		b = appendStart(b, e.XMLName.Local)
		b = appendElem(b, "Key", e.Key)
		b = appendElem(b, "VersionId", e.VersionID)
		b = appendBoolElem(b, "IsLatest", e.IsLatest)
		b = appendTimeElem(b, "LastModified", e.LastModified)
		if e.ETag != nil {
			b = appendETagElem(b, *e.ETag)
		}
		if e.Size != nil {
			b = appendIntElem(b, "Size", *e.Size)
		}
		b = e.Owner.appendXML(b)
		b = appendElemOmitEmpty(b, "StorageClass", e.StorageClass)
		b = appendEnd(b, e.XMLName.Local)
	}
	b = appendCommonPrefixes(b, r.CommonPrefixes)
	return append(b, "</ListVersionsResult>"...)
}

// sizeHint is about the length of r's encoding.
func (r *listVersionsResult) sizeHint() int {
	n := 1024 + len(r.Prefix) + len(r.KeyMarker)
	for i := range r.Entries {
		n += 300 + len(r.Entries[i].Key) + 2*len(r.Entries[i].Owner.ID)
	}
	for _, p := range r.CommonPrefixes {
		n += 50 + len(p.Prefix)
	}
	return n
}

func (o *owner) appendXML(b []byte) []byte {
	b = append(b, "<Owner>"...)
	b = appendElem(b, "ID", o.ID)
	b = appendElem(b, "DisplayName", o.DisplayName)
	return append(b, "</Owner>"...)
}

func appendCommonPrefixes(b []byte, cps []commonPrefix) []byte {
	for _, cp := range cps {
		b = append(b, "<CommonPrefixes>"...)
		b = appendElem(b, "Prefix", cp.Prefix)
		b = append(b, "</CommonPrefixes>"...)
	}
	return b
}

// appendStartNS appends a start tag with an xmlns attribute, which
// encoding/xml writes even when it is empty.
func appendStartNS(b []byte, name, ns string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, ` xmlns="`...)
	b = appendEscaped(b, ns)
	return append(b, `">`...)
}

func appendStart(b []byte, name string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	return append(b, '>')
}

func appendEnd(b []byte, name string) []byte {
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// appendElem appends <name>v</name>; encoding/xml writes an empty element
// as a start and an end tag too.
func appendElem(b []byte, name, v string) []byte {
	b = appendStart(b, name)
	b = appendEscaped(b, v)
	return appendEnd(b, name)
}

// appendElemOmitEmpty is appendElem for an omitempty field.
func appendElemOmitEmpty(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendElem(b, name, v)
}

func appendIntElem(b []byte, name string, v int64) []byte {
	b = appendStart(b, name)
	b = strconv.AppendInt(b, v, 10)
	return appendEnd(b, name)
}

// appendTimeElem appends t, whose text needs no escaping.
func appendTimeElem(b []byte, name string, t isoTimestamp) []byte {
	b = appendStart(b, name)
	b = appendISOTime(b, int64(t))
	return appendEnd(b, name)
}

// appendETagElem appends an ETag element; encoding/xml escapes the quotes
// too.
func appendETagElem(b []byte, e quotedETag) []byte {
	b = append(b, "<ETag>&#34;"...)
	b = appendEscaped(b, string(e))
	return append(b, "&#34;</ETag>"...)
}

func appendBoolElem(b []byte, name string, v bool) []byte {
	b = appendStart(b, name)
	b = strconv.AppendBool(b, v)
	return appendEnd(b, name)
}

// appendEscaped appends s escaped as encoding/xml escapes character data
// and attribute values (xml.EscapeText): the five markup characters,
// tab, newline and carriage return as references (quotes as &#34; and
// &#39;), and every byte or rune XML 1.0 cannot carry — control
// characters, invalid UTF-8, U+FFFE and U+FFFF — as U+FFFD. Such keys do
// not survive a listing unless encoding-type=url is asked for, as with
// encoding/xml before.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		var esc string
		c := s[i]
		width := 1
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\'' && c != '&' && c != '<' && c != '>' {
			i++ // the common case: copied as is
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				esc = "&#34;"
			case '\'':
				esc = "&#39;"
			case '&':
				esc = "&amp;"
			case '<':
				esc = "&lt;"
			case '>':
				esc = "&gt;"
			case '\t':
				esc = "&#x9;"
			case '\n':
				esc = "&#xA;"
			case '\r':
				esc = "&#xD;"
			default: // a control character
				esc = "\uFFFD"
			}
		} else {
			var r rune
			r, width = utf8.DecodeRuneInString(s[i:])
			if (r == utf8.RuneError && width == 1) || !xmlChar(r) {
				esc = "\uFFFD"
			}
		}
		i += width
		if esc != "" {
			b = append(b, s[last:i-width]...)
			b = append(b, esc...)
			last = i
		}
	}
	return append(b, s[last:]...)
}

// xmlChar reports whether XML 1.0 allows r, a rune of two or more bytes
// in UTF-8 (the Char production; the surrogates do not decode).
func xmlChar(r rune) bool {
	return r <= 0xD7FF || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}
