package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/object"
)

// chromium returns Debian's chromium, or skips the test when it is missing
// (scripts/test.sh installs it and sets CAIRN_REQUIRE_CHROMIUM: then a
// missing browser fails).
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CAIRN_REQUIRE_CHROMIUM") != "" {
			t.Fatalf("chromium is missing (CAIRN_REQUIRE_CHROMIUM is set): %v", err)
		}
		t.Skip("no chromium (apt-get install chromium)")
	}
	return p
}

// TestConsoleInABrowser drives the console in headless chromium: sign in,
// browse a space, upload a file twice, browse its versions and diff them,
// run a query, see the cluster page; then, signed in with a read-only
// key, find no upload form, and be refused a delete posted anyway and the
// admins' pages. On a failure it writes a screenshot of the page to a
// temporary directory and names it.
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium(t)
	ctx := context.Background()
	n := memNode(t, false)
	if _, err := n.CreateSpace(ctx, "photos", object.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateKey(ctx, admin.KeySpec{Access: "READONLYKEY", Secret: "read-only-secret-0123", Grants: map[string]string{"photos": "read"}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, ok := n.Keyring().Lookup("READONLYKEY"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new key never reached the keyring")
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + n.HTTPAddr() + "/console"
	file := filepath.Join(t.TempDir(), "hello.txt")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Do(bctx); err != nil { // start the browser, without a timeout
		t.Fatalf("starting chromium: %v", err)
	}
	shots := ""
	step := func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			if shots == "" {
				shots, _ = os.MkdirTemp("", "cairn-console-")
			}
			path := filepath.Join(shots, strings.ReplaceAll(name, " ", "-")+".jpg")
			sctx2, cancel2 := context.WithTimeout(bctx, 10*time.Second)
			defer cancel2()
			if png, serr := chromedp.Run(sctx2, chromedp.FullScreenshot(90)); serr == nil {
				_ = os.WriteFile(path, png, 0o644)
			}
			html, _ := chromedp.Run(sctx2, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("%s: %v (screenshot: %s)\npage: %s", name, err, path, html)
		}
	}
	text := func(sel string) string {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	signIn := func(access, secret string) {
		t.Helper()
		step("sign in as "+access,
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.ID("access_key")),
			chromedp.SendKeys(chromedp.ID("access_key"), access),
			chromedp.SendKeys(chromedp.ID("secret_key"), secret),
			chromedp.Click(chromedp.ID("signin")),
			chromedp.WaitVisible(chromedp.ID("spaces")))
		if got := text("#who"); got != access {
			t.Fatalf("signed in as %q, want %q", got, access)
		}
	}

	signIn("root", "rootsecret123456")
	if !strings.Contains(text("#spaces"), "photos") {
		t.Fatalf("spaces page: %q", text("#spaces"))
	}
	upload := func(body string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		step("upload",
			chromedp.Navigate(base+"/spaces/photos"),
			chromedp.WaitVisible(chromedp.ID("upload")),
			chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}),
			chromedp.SendKeys(chromedp.ID("key"), "docs/hello.txt"),
			chromedp.Click(chromedp.ID("do-upload")),
			chromedp.WaitVisible(chromedp.ID("versions")))
		if !strings.Contains(text(".notice"), "Uploaded docs/hello.txt") {
			t.Fatalf("after the upload: %q", text(".notice"))
		}
	}
	upload("hello, world\n")
	upload("hello, world, again\n")
	rows, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSSAll("#versions tbody tr")))
	if err != nil || len(rows) != 2 {
		t.Fatalf("versions table: %d rows (%v), want 2", len(rows), err)
	}
	if out := os.Getenv("CAIRN_CONSOLE_SCREENSHOT"); out != "" {
		// The README's picture: an object's page with its versions.
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
		if err != nil || os.WriteFile(out, png, 0o644) != nil {
			t.Fatalf("screenshot to %s: %v", out, err)
		}
	}
	step("diff", chromedp.Click(chromedp.ID("diff")), chromedp.WaitVisible(chromedp.ID("ranges")))
	if got := text("#ranges"); !strings.Contains(got, "changed") {
		t.Fatalf("diff of the two versions: %q", got)
	}
	step("query",
		chromedp.Navigate(base+"/query"),
		chromedp.WaitVisible(chromedp.ID("queryform")),
		chromedp.SendKeys(chromedp.ID("qspace"), "photos"),
		chromedp.SendKeys(chromedp.ID("qfilter"), `key.startsWith("docs/") && size > 10`),
		chromedp.Click(chromedp.ID("run")),
		chromedp.WaitVisible(chromedp.ID("results")))
	if got := text("#results"); !strings.Contains(got, "docs/hello.txt") {
		t.Fatalf("query results: %q", got)
	}
	step("cluster page", chromedp.Navigate(base+"/cluster"), chromedp.WaitVisible(chromedp.ID("nodes")))
	if got := text("#nodes"); !strings.Contains(got, "up") {
		t.Fatalf("cluster page nodes: %q", got)
	}

	// The read-only key: no upload form; a delete posted anyway (with the
	// session's own CSRF token) is refused by the server.
	step("sign out", chromedp.Click(chromedp.CSS("header .who button")), chromedp.WaitVisible(chromedp.ID("access_key")))
	signIn("READONLYKEY", "read-only-secret-0123")
	step("browse read-only", chromedp.Navigate(base+"/spaces/photos"), chromedp.WaitVisible(chromedp.ID("objects")))
	if forms, _ := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSSAll("#upload"), chromedp.AtLeast(0))); len(forms) != 0 {
		t.Fatal("a read-only key is shown the upload form")
	}
	step("post a delete",
		chromedp.Evaluate[chromedp.Void](`(function(){var f=document.createElement("form");f.method="post";f.action="/console/spaces/photos/delete";
			for (const [k,v] of [["csrf",document.querySelector("header .who input[name=csrf]").value],["key","docs/hello.txt"]]) {
			var i=document.createElement("input");i.type="hidden";i.name=k;i.value=v;f.appendChild(i);}
			document.body.appendChild(f);f.submit();})()`),
		chromedp.WaitVisible(chromedp.CSS(".error")))
	if got := text(".error"); !strings.Contains(got, "may not write space \"photos\"") {
		t.Fatalf("a read-only key's delete: %q", got)
	}
	step("admins' page", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS(".error")))
	if got := text(".error"); !strings.Contains(got, "for cluster admins") {
		t.Fatalf("a read-only key on the keys page: %q", got)
	}
	// Nothing was deleted.
	if _, err := n.Stat(ctx, &object.GetRequest{Space: "photos", Key: "docs/hello.txt"}); err != nil {
		t.Fatalf("the object after a refused delete: %v", err)
	}
}
