package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/cairn-db/cairn/client"
)

const defaultServer = "127.0.0.1:7070"

// serverAddr is --server, else $CAIRN_SERVER, else the server of the
// credentials profile (creds), else the local default. A comma-separated
// list names several nodes of a cluster: the client starts with the first
// and moves on when one cannot be reached.
func serverAddr(cmd *cobra.Command, creds client.Credentials) string {
	if s, _ := cmd.Flags().GetString("server"); s != "" {
		return s
	}
	if s := os.Getenv("CAIRN_SERVER"); s != "" {
		return s
	}
	if creds.Server != "" {
		return creds.Server
	}
	return defaultServer
}

// clientOptions are the Go client's options from the command line: the
// servers, the key (flags, environment, credentials file) and TLS.
func clientOptions(cmd *cobra.Command) (client.Options, error) {
	access, _ := cmd.Flags().GetString("access-key")
	secret, _ := cmd.Flags().GetString("secret-key")
	profile, _ := cmd.Flags().GetString("profile")
	creds, err := client.FindCredentials(access, secret, profile, "")
	if err != nil {
		return client.Options{}, err
	}
	o := client.Options{Addrs: strings.Split(serverAddr(cmd, creds), ","), AccessKey: creds.AccessKey, SecretKey: creds.SecretKey}
	ca, _ := cmd.Flags().GetString("ca")
	if ca == "" {
		ca = os.Getenv("CAIRN_CA")
	}
	if ca == "" {
		ca = creds.CAFile
	}
	useTLS, _ := cmd.Flags().GetBool("tls")
	switch {
	case ca != "":
		if o.TLS, err = client.CAConfig(ca); err != nil {
			return client.Options{}, usageError{fmt.Errorf("--ca: %w", err)}
		}
	case useTLS:
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

func dial(cmd *cobra.Command) (*client.Client, error) {
	o, err := clientOptions(cmd)
	if err != nil {
		return nil, err
	}
	return client.DialOptions(cmd.Context(), o)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress is a transfer bar on stderr when it is a terminal and the
// transfer is large enough to watch; otherwise it does nothing.
type progress struct {
	p   *mpb.Progress
	bar *mpb.Bar
}

func newProgress(cmd *cobra.Command, label string, total int64) *progress {
	const minSize = 4 << 20
	if !isTerminal(os.Stderr) || (total >= 0 && total < minSize) {
		return &progress{}
	}
	p := mpb.NewWithContext(cmd.Context(), mpb.WithOutput(os.Stderr), mpb.WithWidth(40))
	if total < 0 {
		total = 0 // unknown: the bar counts bytes without a total
	}
	bar := p.AddBar(total,
		mpb.PrependDecorators(decor.Name(label+" "), decor.CountersKibiByte("% .1f / % .1f")),
		mpb.AppendDecorators(decor.AverageSpeed(decor.SizeB1024(0), "% .1f"), decor.Name(" "), decor.Percentage()),
	)
	return &progress{p: p, bar: bar}
}

func (p *progress) wrap(r io.Reader) io.Reader {
	if p.bar == nil {
		return r
	}
	pr, err := p.bar.ProxyReader(r)
	if err != nil {
		return r
	}
	return pr
}

// done finishes the bar; it is safe to call more than once.
func (p *progress) done() {
	if p.p == nil {
		return
	}
	if !p.bar.Completed() {
		p.bar.SetTotal(-1, true)
	}
	p.p.Wait()
	p.p = nil
}

func cmdStderr(cmd *cobra.Command) *os.File {
	if f, ok := cmd.ErrOrStderr().(*os.File); ok {
		return f
	}
	return nil // not a file, so not a terminal
}
