package s3_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestCORS: a bucket's CORS rules (Put/Get/DeleteBucketCors, validated as
// S3 validates them) answer browsers' preflights without a signature and
// give requests from an allowed origin their Access-Control headers, on
// errors too; an origin, method or header no rule allows gets none (403
// for a preflight).
func TestCORS(t *testing.T) {
	_, ep := openNode(t, nil, nil)
	c := client(ep, testAccess, testSecret)
	ctx := context.Background()
	b := aws.String("web")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b}); apiCode(err) != "NoSuchCORSConfiguration" {
		t.Fatalf("GetBucketCors with none: %v", err)
	}
	send := func(method, url string, hd map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		for k, v := range hd {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	pre := map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT"}
	if r := send(http.MethodOptions, ep+"/web/k", pre); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a preflight before any rule: %d", r.StatusCode)
	}
	for _, bad := range []types.CORSRule{
		{AllowedMethods: []string{"PATCH"}, AllowedOrigins: []string{"*"}},
		{AllowedMethods: []string{"GET"}, AllowedOrigins: []string{"*.*.example.com"}},
	} {
		if _, err := c.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{bad}}}); apiCode(err) != "InvalidRequest" {
			t.Fatalf("a rule %+v: %v", bad, err)
		}
	}
	rules := []types.CORSRule{
		{AllowedMethods: []string{"GET", "PUT"}, AllowedOrigins: []string{"https://*.example.com"}, AllowedHeaders: []string{"content-type", "x-amz-*"},
			ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(600)},
		{AllowedMethods: []string{"GET"}, AllowedOrigins: []string{"*"}},
	}
	if _, err := c.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{CORSRules: rules}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b})
	if err != nil || len(got.CORSRules) != 2 || got.CORSRules[0].AllowedOrigins[0] != "https://*.example.com" || aws.ToInt32(got.CORSRules[0].MaxAgeSeconds) != 600 {
		t.Fatalf("GetBucketCors: %+v %v", got, err)
	}

	pre["Access-Control-Request-Headers"] = "Content-Type, X-Amz-Meta-Owner"
	r := send(http.MethodOptions, ep+"/web/k", pre)
	if r.StatusCode != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		r.Header.Get("Access-Control-Allow-Methods") != "GET, PUT" || r.Header.Get("Access-Control-Max-Age") != "600" ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "x-amz-meta-owner") {
		t.Fatalf("an allowed preflight: %d %v", r.StatusCode, r.Header)
	}
	for name, hd := range map[string]map[string]string{
		"another origin's PUT":  {"Origin": "https://evil.test", "Access-Control-Request-Method": "PUT"},
		"a header not allowed":  {"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "authorization-x"},
		"a method not allowed":  {"Origin": "https://app.example.com", "Access-Control-Request-Method": "DELETE"},
		"a nested origin match": {"Origin": "https://app.example.com.evil.test", "Access-Control-Request-Method": "PUT"},
	} {
		if r := send(http.MethodOptions, ep+"/web/k", hd); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %v", name, r.StatusCode, r.Header)
		}
	}
	if r := send(http.MethodOptions, ep+"/web/k", map[string]string{"Origin": "https://app.example.com"}); r.StatusCode != http.StatusBadRequest {
		t.Errorf("a preflight without Access-Control-Request-Method: %d", r.StatusCode)
	}
	// An unsigned GET from any origin: refused (the bucket is private), but
	// with the wildcard rule's headers, so the page can read the error.
	r = send(http.MethodGet, ep+"/web/k", map[string]string{"Origin": "https://anywhere.test"})
	if r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Access-Control-Allow-Methods") != "GET" {
		t.Fatalf("a GET from another origin: %d %v", r.StatusCode, r.Header)
	}
	if r := send(http.MethodGet, ep+"/web/k", nil); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a request without Origin got CORS headers: %v", r.Header)
	}
	if _, err := c.DeleteBucketCors(ctx, &s3.DeleteBucketCorsInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: b}); apiCode(err) != "NoSuchCORSConfiguration" {
		t.Fatalf("GetBucketCors after the delete: %v", err)
	}
}
