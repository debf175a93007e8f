package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/e2es3"
)

// image is the image the tests build once and share; TestMain removes it.
var image struct {
	once sync.Once
	tag  string
	err  error
}

// testImage builds the FROM-scratch image the first time a test asks for
// it and returns its tag.
func testImage(t testing.TB) string {
	t.Helper()
	requireDocker(t)
	image.once.Do(func() {
		tag := fmt.Sprintf("cairn-test:%d", os.Getpid())
		out, err := exec.Command("./build-image.sh", tag).CombinedOutput()
		if err != nil {
			image.err = fmt.Errorf("build image: %v\n%s", err, out)
			return
		}
		image.tag = tag
	})
	if image.err != nil {
		t.Fatal(image.err)
	}
	return image.tag
}

// The clusters' root key and join token. Every container is given the
// key (CAIRN_ROOT_ACCESS_KEY), and the test's clients find it in
// CAIRN_ACCESS_KEY, as a user's would.
var (
	rootAccess = e2es3.AccessKey
	rootSecret = e2es3.SecretKey
	joinToken  = auth.NewJoinToken().String()
)

func TestMain(m *testing.M) {
	os.Setenv("CAIRN_ACCESS_KEY", rootAccess)
	os.Setenv("CAIRN_SECRET_KEY", rootSecret)
	code := m.Run()
	if image.tag != "" {
		exec.Command("docker", "rmi", "-f", image.tag).Run()
	}
	os.Exit(code)
}
