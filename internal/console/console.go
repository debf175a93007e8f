// Package console serves the web console at /console on every node:
// server-rendered pages (html/template, embedded) that read without any
// JavaScript, and a few lines of plain JavaScript for confirmations and
// a live chart.
//
// A user signs in with an access key and its secret; the console then
// acts as that key, with its grants, as every protocol does: each page
// checks the grant it needs before it calls the object service. The
// session is a random token in an HttpOnly, SameSite=Strict cookie
// scoped to /console, kept in this node's memory (a node restart, or
// another node, asks to sign in again); every form that changes
// something carries the session's CSRF token. See docs/api.md,
// "Console".
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// Prefix is where the console lives.
const Prefix = "/console"

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 12 * time.Hour

// maxSessions bounds the sessions a node keeps (the oldest go first).
const maxSessions = 10000

const cookieName = "cairn_console"

//go:embed templates/*.html static/*
var files embed.FS

// Config configures a Handler.
type Config struct {
	// Service is the object service the pages call; what else it
	// implements (versions, snapshots, branches, queries, SQL, the
	// cluster report, key management) lights up the pages that need it.
	Service object.Service
	// Keys authenticates sign-ins and authorizes every page.
	Keys *auth.Keyring
	// Stats, if set, gives the cluster page its throughput and latency
	// charts.
	Stats *Stats
	// Secure marks the cookie Secure (the port serves TLS).
	Secure bool
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Handler serves the console.
type Handler struct {
	cfg  Config
	tmpl *template.Template
	mux  *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	access  string
	csrf    string
	expires time.Time
}

// New returns a console handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg, sessions: map[string]*session{}}
	h.tmpl = template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/*.html"))
	static, _ := fs.Sub(files, "static")
	m := http.NewServeMux()
	m.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", staticFiles(http.FileServerFS(static))))
	m.HandleFunc("GET "+Prefix+"/signin", h.signinPage)
	m.HandleFunc("POST "+Prefix+"/signin", h.signin)
	m.HandleFunc("POST "+Prefix+"/signout", h.authed(h.signout))
	m.HandleFunc("GET "+Prefix+"/{$}", h.authed(func(w http.ResponseWriter, r *http.Request, s *session) {
		http.Redirect(w, r, Prefix+"/spaces", http.StatusSeeOther)
	}))
	m.HandleFunc("GET "+Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
	})
	m.HandleFunc("GET "+Prefix+"/spaces", h.authed(h.spaces))
	m.HandleFunc("GET "+Prefix+"/spaces/{space}", h.authed(h.objects))
	m.HandleFunc("POST "+Prefix+"/spaces/{space}/upload", h.authed(h.upload))
	m.HandleFunc("GET "+Prefix+"/spaces/{space}/object", h.authed(h.object))
	m.HandleFunc("GET "+Prefix+"/spaces/{space}/download", h.authed(h.download))
	m.HandleFunc("POST "+Prefix+"/spaces/{space}/delete", h.authed(h.deleteObject))
	m.HandleFunc("POST "+Prefix+"/spaces/{space}/tags", h.authed(h.setTags))
	m.HandleFunc("GET "+Prefix+"/spaces/{space}/lineage", h.authed(h.lineage))
	m.HandleFunc("GET "+Prefix+"/spaces/{space}/diff", h.authed(h.diff))
	m.HandleFunc("GET "+Prefix+"/snapshots", h.authed(h.snapshots))
	m.HandleFunc("POST "+Prefix+"/snapshots", h.authed(h.snapshotAction))
	m.HandleFunc("GET "+Prefix+"/branches", h.authed(h.branches))
	m.HandleFunc("POST "+Prefix+"/branches", h.authed(h.branchAction))
	m.HandleFunc("GET "+Prefix+"/query", h.authed(h.query))
	m.HandleFunc("GET "+Prefix+"/sql", h.authed(h.sql))
	m.HandleFunc("GET "+Prefix+"/cluster", h.authed(h.cluster))
	m.HandleFunc("GET "+Prefix+"/cluster/chart.svg", h.authed(h.chart))
	m.HandleFunc("GET "+Prefix+"/keys", h.authed(h.keys))
	m.HandleFunc("POST "+Prefix+"/keys", h.authed(h.keyAction))
	h.mux = m
	return h
}

// staticFiles lets browsers keep the embedded files for an hour.
func staticFiles(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// No framing (clickjacking), no inline scripts or foreign sources.
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), startKey{}, h.cfg.Now())))
}

// startKey holds when the console took the request (Server-Timing).
type startKey struct{}

// authed wraps a page that needs a signed-in user; a POST must carry the
// session's CSRF token.
func (h *Handler) authed(page func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := h.session(r)
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.fail(w, r, nil, http.StatusUnauthorized, "Your session ended: sign in again.")
			return
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			// A multipart body (an upload) is read by its page, after
			// the grant check, which checks the token then.
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := r.ParseForm(); err != nil {
				h.fail(w, r, s, http.StatusBadRequest, "The form could not be read: "+err.Error())
				return
			}
			if !h.csrfOK(r, s) {
				h.fail(w, r, s, http.StatusForbidden, csrfMessage)
				return
			}
		} else if r.Method == http.MethodPost && r.URL.Path != "" && !strings.HasSuffix(r.URL.Path, "/upload") {
			h.fail(w, r, s, http.StatusBadRequest, "Only uploads send files.")
			return
		}
		page(w, r, s)
	}
}

const csrfMessage = "The form is not this session's (an old page, or another site's): reload the page and try again."

// csrfOK checks the form's CSRF token against the session's.
func (h *Handler) csrfOK(r *http.Request, s *session) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) == 1
}

// session returns the request's live session, or nil.
func (h *Handler) session(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	h.mu.Lock()
	s := h.sessions[c.Value]
	h.mu.Unlock()
	if s == nil || h.cfg.Now().After(s.expires) {
		return nil
	}
	if _, ok := h.cfg.Keys.Lookup(s.access); !ok {
		return nil // the key was deleted or rotated away
	}
	return s
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (h *Handler) signinPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, nil, http.StatusOK, "signin", map[string]any{"Next": safeNext(r.FormValue("next"))})
}

// safeNext keeps a redirect after sign-in within the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "/spaces"
	}
	return next
}

func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	access, secret := strings.TrimSpace(r.FormValue("access_key")), r.FormValue("secret_key")
	want, ok := h.cfg.Keys.Secret(access)
	if !ok || access == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(want)) != 1 {
		time.Sleep(200 * time.Millisecond) // a guesser's pace
		h.render(w, r, nil, http.StatusUnauthorized, "signin", map[string]any{"Next": safeNext(r.FormValue("next")), "Access": access,
			"Error": "That access key and secret do not match a key of this cluster."})
		return
	}
	token := randomToken()
	s := &session{access: access, csrf: randomToken(), expires: h.cfg.Now().Add(SessionTTL)}
	h.mu.Lock()
	now := h.cfg.Now()
	for t, old := range h.sessions {
		if now.After(old.expires) {
			delete(h.sessions, t)
		}
	}
	if len(h.sessions) >= maxSessions {
		var oldest string
		for t, old := range h.sessions {
			if oldest == "" || old.expires.Before(h.sessions[oldest].expires) {
				oldest = t
			}
		}
		delete(h.sessions, oldest)
	}
	h.sessions[token] = s
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: token, Path: Prefix, HttpOnly: true, Secure: h.cfg.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(SessionTTL / time.Second)})
	http.Redirect(w, r, safeNext(r.FormValue("next")), http.StatusSeeOther)
}

func (h *Handler) signout(w http.ResponseWriter, r *http.Request, s *session) {
	h.mu.Lock()
	for t, x := range h.sessions {
		if x == s {
			delete(h.sessions, t)
		}
	}
	h.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, HttpOnly: true, Secure: h.cfg.Secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}

// page is what every template gets.
type page struct {
	Access       string
	CSRF         string
	ClusterAdmin bool
	Title        string
	Error        string
	Notice       string
	Data         any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, s *session, status int, name string, data any) {
	p := page{Title: name, Data: data}
	start, ok := r.Context().Value(startKey{}).(time.Time)
	if !ok {
		start = h.cfg.Now()
	}
	if s != nil {
		p.Access, p.CSRF = s.access, s.csrf
		if k, ok := h.cfg.Keys.Lookup(s.access); ok {
			p.ClusterAdmin = k.ClusterAdmin
		}
	}
	if m, ok := data.(map[string]any); ok {
		if e, ok := m["Error"].(string); ok {
			p.Error = e
		}
		if n, ok := m["Notice"].(string); ok {
			p.Notice = n
		}
	}
	if n := r.FormValue("notice"); n != "" && p.Notice == "" {
		p.Notice = n
	}
	var b strings.Builder
	if err := h.tmpl.ExecuteTemplate(&b, name, &p); err != nil {
		h.cfg.Logger.Error("console: rendering a page failed", "page", name, "err", err)
		http.Error(w, "the page could not be rendered (logged by the server)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page's time on the server: its calls and its rendering.
	w.Header().Set("Server-Timing", fmt.Sprintf("page;dur=%.2f", float64(h.cfg.Now().Sub(start).Microseconds())/1000))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail answers a page with an error: what went wrong and what to do.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	h.render(w, r, s, status, "error", map[string]any{"Error": msg})
}

// failErr answers err, a service's failure.
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status := http.StatusInternalServerError
	switch object.KindOf(err) {
	case object.NotFound, object.SpaceNotFound:
		status = http.StatusNotFound
	case object.AccessDenied:
		status = http.StatusForbidden
	case object.InvalidArgument, object.Malformed, object.BadSpaceName, object.KeyTooLong, object.TooLarge:
		status = http.StatusBadRequest
	case object.PreconditionFailed, object.TxnConflict, object.SpaceExists, object.SpaceNotEmpty:
		status = http.StatusConflict
	case object.Unavailable, object.NotLeader, object.RangeMoved:
		status = http.StatusServiceUnavailable
	}
	msg := err.Error()
	var oe *object.Error
	if errors.As(err, &oe) && oe.Message != "" {
		msg = oe.Message
	}
	h.fail(w, r, s, status, msg)
}

// allow checks s's grant on space; a missing one answers 403 and false.
func (h *Handler) allow(w http.ResponseWriter, r *http.Request, s *session, space, need string) bool {
	if h.cfg.Keys.Allowed(s.access, space, need) {
		return true
	}
	h.fail(w, r, s, http.StatusForbidden, fmt.Sprintf("Access key %s may not %s space %q: that needs the %s grant (a cluster admin gives it with `cairn key grant`).", s.access, need, space, need))
	return false
}

// clusterAdmin checks s's key is a cluster admin's.
func (h *Handler) clusterAdmin(w http.ResponseWriter, r *http.Request, s *session) bool {
	if k, ok := h.cfg.Keys.Lookup(s.access); ok && k.ClusterAdmin {
		return true
	}
	h.fail(w, r, s, http.StatusForbidden, fmt.Sprintf("This page is for cluster admins: access key %s does not hold the cluster-admin grant.", s.access))
	return false
}

// back redirects to a page with a notice (post, redirect, get).
func back(w http.ResponseWriter, r *http.Request, to, notice string) {
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	http.Redirect(w, r, to+sep+"notice="+url.QueryEscape(notice), http.StatusSeeOther)
}

// ctx bounds a page's calls.
func ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 30*time.Second)
}
