package s3

import (
	"cmp"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/internal/object"
)

// Cross-origin resource sharing. A bucket's CORS configuration (a bucket
// document, PutBucketCors) says which web origins may use it from a
// browser: each rule names origins (one "*" wildcard each), methods,
// request headers the browser may send and response headers it may read.
// A preflight (OPTIONS with Origin and Access-Control-Request-Method)
// needs no signature and is answered from the first rule that allows the
// origin, the method and every requested header, or refused with 403.
// Any other request that carries Origin gets the Access-Control-*
// headers of the first rule that allows its origin and method
// (Access-Control-Request-Method, when sent, else the request's own),
// whatever its outcome, so that a browser can read the errors too.

const (
	corsConfig   = "cors"
	maxCORSRules = 100
)

type corsConfiguration struct {
	XMLName xml.Name   `xml:"CORSConfiguration"`
	NS      string     `xml:"xmlns,attr,omitempty"`
	Rules   []corsRule `xml:"CORSRule"`
}

type corsRule struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds"`
}

var corsMethods = []string{http.MethodGet, http.MethodPut, http.MethodHead, http.MethodPost, http.MethodDelete}

// parseCORS validates a PutBucketCors document as S3 does and returns
// the document to keep.
func parseCORS(body []byte) ([]byte, *apiError) {
	var c corsConfiguration
	if err := xml.Unmarshal(body, &c); err != nil || c.XMLName.Local != "CORSConfiguration" {
		return nil, errMalformedXML
	}
	switch {
	case len(c.Rules) == 0:
		return nil, errMalformedXML.with("A CORS configuration has at least one CORSRule.")
	case len(c.Rules) > maxCORSRules:
		return nil, errMalformedXML.with("A CORS configuration has at most 100 rules.")
	}
	for _, r := range c.Rules {
		if len(r.AllowedMethods) == 0 || len(r.AllowedOrigins) == 0 {
			return nil, errMalformedXML.with("A CORSRule names at least one AllowedMethod and one AllowedOrigin.")
		}
		for _, m := range r.AllowedMethods {
			if !slices.Contains(corsMethods, m) {
				return nil, errInvalidRequest.with("Found unsupported HTTP method in CORS config. Unsupported method is " + m)
			}
		}
		for _, o := range r.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return nil, errInvalidRequest.with("AllowedOrigin " + strconv.Quote(o) + " can not have more than one wildcard.")
			}
		}
		for _, h := range r.AllowedHeaders {
			if strings.Count(h, "*") > 1 {
				return nil, errInvalidRequest.with("AllowedHeader " + strconv.Quote(h) + " can not have more than one wildcard.")
			}
		}
		if r.MaxAgeSeconds != nil && *r.MaxAgeSeconds < 0 {
			return nil, errMalformedXML.with("MaxAgeSeconds is not negative.")
		}
	}
	c.NS = s3NS
	doc, _ := xml.Marshal(&c)
	return doc, nil
}

// wildMatch matches s against a pattern with at most one "*", which
// stands for any run of characters (none included).
func wildMatch(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	before, after, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == s
	}
	return len(s) >= len(before)+len(after) && strings.HasPrefix(s, before) && strings.HasSuffix(s, after)
}

// match is the first rule that lets origin use method, sending the
// headers named, or nil.
func (c *corsConfiguration) match(origin, method string, headers []string) *corsRule {
	for i := range c.Rules {
		if c.Rules[i].allows(origin, method, headers) {
			return &c.Rules[i]
		}
	}
	return nil
}

// allows reports whether the rule lets origin use method, sending the
// headers named.
func (r *corsRule) allows(origin, method string, headers []string) bool {
	if !slices.Contains(r.AllowedMethods, method) {
		return false
	}
	if !slices.ContainsFunc(r.AllowedOrigins, func(p string) bool { return wildMatch(p, origin, false) }) {
		return false
	}
	for _, h := range headers {
		if !slices.ContainsFunc(r.AllowedHeaders, func(p string) bool { return wildMatch(p, h, true) }) {
			return false
		}
	}
	return true
}

// bucketCORS is the bucket's CORS configuration, or nil.
func (h *Handler) bucketCORS(q *request) (*corsConfiguration, error) {
	doc, err := h.config(q.r.Context(), q.bucket, corsConfig)
	if err != nil || doc == nil {
		return nil, err
	}
	var c corsConfiguration
	if err := xml.Unmarshal(doc, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// setCORSHeaders sets the Access-Control-* headers a rule grants.
func setCORSHeaders(hd http.Header, r *corsRule, origin string, requested []string) {
	if slices.Contains(r.AllowedOrigins, "*") {
		hd.Set("Access-Control-Allow-Origin", "*")
	} else {
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Set("Access-Control-Allow-Credentials", "true")
	}
	hd.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
	if len(requested) > 0 {
		hd.Set("Access-Control-Allow-Headers", strings.Join(requested, ", "))
	}
	if len(r.ExposeHeaders) > 0 {
		hd.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	if r.MaxAgeSeconds != nil {
		hd.Set("Access-Control-Max-Age", strconv.Itoa(*r.MaxAgeSeconds))
	}
	hd.Add("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// requestedHeaders splits Access-Control-Request-Headers.
func requestedHeaders(hd http.Header) []string {
	var out []string
	for _, v := range hd.Values("Access-Control-Request-Headers") {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				out = append(out, strings.ToLower(h))
			}
		}
	}
	return out
}

// corsResponse adds the CORS headers to a request from a web origin
// (one that carries Origin) to a bucket with a CORS configuration.
func (h *Handler) corsResponse(q *request) {
	origin := q.r.Header.Get("Origin")
	c, err := h.bucketCORS(q)
	if err != nil || c == nil {
		return
	}
	method := cmp.Or(q.r.Header.Get("Access-Control-Request-Method"), q.r.Method)
	if r := c.match(origin, method, nil); r != nil {
		setCORSHeaders(q.w.Header(), r, origin, nil)
	}
}

var (
	errCORSNoOrigin = &apiError{"BadRequest", http.StatusBadRequest, "Insufficient information. Origin request header needed."}
	errCORSNoMethod = &apiError{"BadRequest", http.StatusBadRequest, "Invalid Access-Control-Request-Method: null."}
	// S3's own words (its misspelling included: clients match on them).
	errCORSOff     = &apiError{"AccessForbidden", http.StatusForbidden, "CORSResponse: CORS is not enabled for this bucket."}
	errCORSRefused = &apiError{"AccessForbidden", http.StatusForbidden, "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."}
)

// preflight answers a browser's OPTIONS request.
func (h *Handler) preflight(q *request) {
	hd := q.r.Header
	origin, method := hd.Get("Origin"), hd.Get("Access-Control-Request-Method")
	switch {
	case origin == "":
		q.fail(errCORSNoOrigin)
		return
	case method == "":
		q.fail(errCORSNoMethod)
		return
	}
	c, err := h.bucketCORS(q)
	switch {
	case object.KindOf(err) == object.SpaceNotFound:
		q.fail(errNoSuchBucket)
		return
	case err != nil:
		h.serviceError(q, err)
		return
	case c == nil:
		q.fail(errCORSOff)
		return
	}
	requested := requestedHeaders(hd)
	r := c.match(origin, method, requested)
	if r == nil {
		q.fail(errCORSRefused)
		return
	}
	setCORSHeaders(q.w.Header(), r, origin, requested)
	q.w.WriteHeader(http.StatusOK)
}
