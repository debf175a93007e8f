package console

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// pageSize is the objects of one page of a listing.
const pageSize = 100

// spaceRow is a space on the spaces page.
type spaceRow struct {
	Name, Placement, Retention string
	Grant                      string
}

func (h *Handler) spaces(w http.ResponseWriter, r *http.Request, s *session) {
	c, cancel := ctx(r)
	defer cancel()
	all, err := h.cfg.Service.ListSpaces(c)
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	var rows []spaceRow
	for _, sp := range all {
		grant := ""
		for _, g := range []string{auth.Admin, auth.Write, auth.Read} {
			if h.cfg.Keys.Allowed(s.access, sp.Name, g) {
				grant = g
				break
			}
		}
		if grant == "" {
			continue
		}
		rows = append(rows, spaceRow{Name: sp.Name, Placement: cmpOr(sp.Settings.Placement, "ordered"), Retention: retention(sp.Settings), Grant: grant})
	}
	h.render(w, r, s, http.StatusOK, "spaces", map[string]any{"Spaces": rows})
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// retention says what a space keeps.
func retention(st object.SpaceSettings) string {
	switch st.Retention {
	case "last":
		return fmt.Sprintf("last %d versions", st.KeepLast)
	case "duration":
		return "noncurrent for " + (time.Duration(st.KeepForSeconds) * time.Second).String()
	}
	return "every version"
}

// objectRow is one object of a listing.
type objectRow struct {
	Key, Version, Modified, ContentType string
	Size                                int64
}

func infoRow(i object.Info) objectRow {
	return objectRow{Key: i.Key, Version: tstamp.String(i.Version), Modified: when(i.Modified), ContentType: i.ContentType, Size: i.Size}
}

func when(unixNano int64) string {
	if unixNano == 0 {
		return ""
	}
	return time.Unix(0, unixNano).UTC().Format("2006-01-02 15:04:05")
}

func (h *Handler) objects(w http.ResponseWriter, r *http.Request, s *session) {
	space := r.PathValue("space")
	if !h.allow(w, r, s, space, auth.Read) {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	prefix, after := r.FormValue("prefix"), r.FormValue("after")
	res, err := h.cfg.Service.List(c, &object.ListRequest{Space: space, Prefix: prefix, StartAfter: after, Limit: pageSize})
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	rows := make([]objectRow, 0, len(res.Objects))
	for _, o := range res.Objects {
		rows = append(rows, infoRow(o))
	}
	next := ""
	if res.Truncated {
		next = "?" + url.Values{"prefix": {prefix}, "after": {res.Next}}.Encode()
	}
	h.render(w, r, s, http.StatusOK, "objects", map[string]any{"Space": space, "Prefix": prefix, "After": after, "Objects": rows, "Next": next,
		"CanWrite": h.cfg.Keys.Allowed(s.access, space, auth.Write)})
}

// maxUpload bounds one upload through the console.
const maxUpload = 5 << 30

func (h *Handler) upload(w http.ResponseWriter, r *http.Request, s *session) {
	space := r.PathValue("space")
	if !h.allow(w, r, s, space, auth.Write) {
		return
	}
	// Only now is the body read (authed leaves a multipart body alone):
	// at most maxUpload and its form, spooled by the multipart reader.
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload+1<<20)
	if err := r.ParseMultipartForm(32 << 10); err != nil {
		h.fail(w, r, s, http.StatusBadRequest, "The upload could not be read: "+err.Error())
		return
	}
	defer r.MultipartForm.RemoveAll()
	if !h.csrfOK(r, s) {
		h.fail(w, r, s, http.StatusForbidden, csrfMessage)
		return
	}
	f, fh, err := r.FormFile("file")
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, "Choose a file to upload.")
		return
	}
	defer f.Close()
	key := strings.TrimSpace(r.FormValue("key"))
	if key == "" {
		key = r.FormValue("prefix") + path.Base(fh.Filename)
	}
	if fh.Size > maxUpload {
		h.fail(w, r, s, http.StatusRequestEntityTooLarge, fmt.Sprintf("The console uploads at most %d GiB; use `cairn put` or an S3 client for more.", maxUpload>>30))
		return
	}
	tags, err := parseTags(r.FormValue("tags"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	ct := fh.Header.Get("Content-Type")
	if ct == "" || ct == "application/octet-stream" {
		if t := mime.TypeByExtension(path.Ext(key)); t != "" {
			ct = t
		}
	}
	c, cancel := ctx(r)
	defer cancel()
	info, err := h.cfg.Service.Put(c, &object.PutRequest{Space: space, Key: key, Size: fh.Size, ContentType: ct, Tags: tags}, f)
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	back(w, r, objectURL(space, key), fmt.Sprintf("Uploaded %s (%d bytes) as version %s.", key, info.Size, tstamp.String(info.Version)))
}

// parseTags reads "a=b, c=d" (or one a=b a line).
func parseTags(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("tag %q: write tags as name=value, separated by commas", f)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func objectURL(space, key string) string {
	return Prefix + "/spaces/" + url.PathEscape(space) + "/object?" + url.Values{"key": {key}}.Encode()
}

// versionRow is one version on an object's page.
type versionRow struct {
	Version, Parent, Modified, ETag, Hash, ContentType, Origin string
	Size                                                       int64
	DeleteMarker                                               bool
	Tags                                                       []string
}

func versionOf(i object.Info) versionRow {
	v := versionRow{Version: tstamp.String(i.Version), Modified: when(i.Modified), ETag: i.ETag, Hash: fmt.Sprintf("%x", i.Hash[:8]),
		ContentType: i.ContentType, Size: i.Size, DeleteMarker: i.DeleteMarker}
	if i.Parent != 0 {
		v.Parent = tstamp.String(i.Parent)
	}
	if i.Origin != nil {
		v.Origin = fmt.Sprintf("%s/%s@%s", i.Origin.Space, i.Origin.Key, tstamp.String(i.Origin.Version))
	}
	for k, val := range i.Tags {
		v.Tags = append(v.Tags, k+"="+val)
	}
	sort.Strings(v.Tags)
	return v
}

func (h *Handler) object(w http.ResponseWriter, r *http.Request, s *session) {
	space, key := r.PathValue("space"), r.FormValue("key")
	if !h.allow(w, r, s, space, auth.Read) {
		return
	}
	if key == "" {
		h.fail(w, r, s, http.StatusBadRequest, "Name an object: ?key=KEY.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	res, err := h.cfg.Service.Versions(c, &object.VersionsRequest{Space: space, Key: key})
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	if len(res.Versions) == 0 {
		h.fail(w, r, s, http.StatusNotFound, fmt.Sprintf("%s/%s has no versions.", space, key))
		return
	}
	rows := make([]versionRow, 0, len(res.Versions))
	for _, v := range res.Versions {
		rows = append(rows, versionOf(v))
	}
	h.render(w, r, s, http.StatusOK, "object", map[string]any{"Space": space, "Key": key, "Versions": rows, "Latest": rows[0],
		"Truncated": res.Truncated, "CanWrite": h.cfg.Keys.Allowed(s.access, space, auth.Write),
		"Tags": strings.Join(rows[0].Tags, ", ")})
}

func parseVersion(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := tstamp.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("version %q is not a version id (16 hex digits)", s)
	}
	return v, nil
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request, s *session) {
	space, key := r.PathValue("space"), r.FormValue("key")
	if !h.allow(w, r, s, space, auth.Read) {
		return
	}
	v, err := parseVersion(r.FormValue("version"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	info, body, err := h.cfg.Service.Get(r.Context(), &object.GetRequest{Space: space, Key: key, Version: v, Length: -1})
	if err == nil {
		if err = object.CheckPlain(&info); err != nil {
			body.Close()
		}
	}
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	defer body.Close()
	ct := info.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd := w.Header()
	hd.Set("Content-Type", ct)
	hd.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(key)}))
	hd.Set("Content-Security-Policy", "sandbox")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, body)
}

func (h *Handler) deleteObject(w http.ResponseWriter, r *http.Request, s *session) {
	space, key := r.PathValue("space"), r.FormValue("key")
	if !h.allow(w, r, s, space, auth.Write) {
		return
	}
	v, err := parseVersion(r.FormValue("version"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	if _, err := h.cfg.Service.Delete(c, &object.DeleteRequest{Space: space, Key: key, Version: v}); err != nil {
		h.failErr(w, r, s, err)
		return
	}
	if v != 0 {
		back(w, r, objectURL(space, key), "Removed version "+tstamp.String(v)+".")
		return
	}
	back(w, r, objectURL(space, key), "Deleted "+key+" (a delete marker is now its latest version; the versions before it stay).")
}

func (h *Handler) setTags(w http.ResponseWriter, r *http.Request, s *session) {
	space, key := r.PathValue("space"), r.FormValue("key")
	if !h.allow(w, r, s, space, auth.Write) {
		return
	}
	tg, ok := h.cfg.Service.(object.Tagger)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server does not change tags.")
		return
	}
	tags, err := parseTags(r.FormValue("tags"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	v, err := parseVersion(r.FormValue("version"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	if _, err := tg.SetTags(c, &object.TagRequest{Space: space, Key: key, Version: v, Tags: tags}); err != nil {
		h.failErr(w, r, s, err)
		return
	}
	back(w, r, objectURL(space, key), "Tags saved.")
}

func (h *Handler) versioner(w http.ResponseWriter, r *http.Request, s *session) (object.Versioner, bool) {
	vs, ok := h.cfg.Service.(object.Versioner)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server keeps no lineage.")
	}
	return vs, ok
}

func (h *Handler) lineage(w http.ResponseWriter, r *http.Request, s *session) {
	space, key := r.PathValue("space"), r.FormValue("key")
	if !h.allow(w, r, s, space, auth.Read) {
		return
	}
	vs, ok := h.versioner(w, r, s)
	if !ok {
		return
	}
	v, err := parseVersion(r.FormValue("version"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	l, err := vs.Lineage(c, &object.LineageRequest{Space: space, Key: key, Version: v, Limit: 100})
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	type entry struct {
		versionRow
		Space, Key  string
		Clone, Gone bool
	}
	conv := func(e object.LineageEntry) entry {
		v := versionOf(e.Info)
		if e.Gone {
			v.Version = tstamp.String(e.Version)
		}
		return entry{versionRow: v, Space: e.Space, Key: e.Key, Clone: e.Clone, Gone: e.Gone}
	}
	// As the JSON API: the chain stops at the first space the key may
	// not read, and children there are left out.
	var ancestors, children []entry
	truncated := l.Truncated
	for _, a := range l.Ancestors {
		if a.Space != "" && !h.cfg.Keys.Allowed(s.access, a.Space, auth.Read) {
			truncated = true
			break
		}
		ancestors = append(ancestors, conv(a))
	}
	for _, c := range l.Children {
		if h.cfg.Keys.Allowed(s.access, c.Space, auth.Read) {
			children = append(children, conv(c))
		}
	}
	h.render(w, r, s, http.StatusOK, "lineage", map[string]any{"Space": space, "Key": key, "Version": versionOf(l.Version),
		"Ancestors": ancestors, "Children": children, "Truncated": truncated})
}

func (h *Handler) diff(w http.ResponseWriter, r *http.Request, s *session) {
	space, key := r.PathValue("space"), r.FormValue("key")
	if !h.allow(w, r, s, space, auth.Read) {
		return
	}
	vs, ok := h.versioner(w, r, s)
	if !ok {
		return
	}
	from, err := parseVersion(r.FormValue("from"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	to, err := parseVersion(r.FormValue("to"))
	if err != nil {
		h.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	d, err := vs.Diff(c, &object.DiffRequest{Space: space, Key: key, From: from, To: to})
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	type rng struct{ Offset, Length int64 }
	var ranges []rng
	var changed int64
	for _, e := range d.Ranges {
		ranges = append(ranges, rng{e.Off, e.Len})
		changed += e.Len
	}
	h.render(w, r, s, http.StatusOK, "diff", map[string]any{"Space": space, "Key": key, "From": versionOf(d.From), "To": versionOf(d.To),
		"Changes": d.Changes, "Ranges": ranges, "Changed": changed, "Exact": d.Exact})
}

func (h *Handler) snapshots(w http.ResponseWriter, r *http.Request, s *session) {
	sn, ok := h.cfg.Service.(object.Snapshotter)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server makes no snapshots.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	all, err := sn.Snapshots(c, "")
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	type row struct{ Name, Space, At, Created string }
	var rows []row
	for _, x := range all {
		if h.cfg.Keys.Allowed(s.access, x.Space, auth.Read) {
			rows = append(rows, row{x.Name, x.Space, tstamp.String(x.At), when(x.Created)})
		}
	}
	h.render(w, r, s, http.StatusOK, "snapshots", map[string]any{"Snapshots": rows})
}

func (h *Handler) snapshotAction(w http.ResponseWriter, r *http.Request, s *session) {
	sn, ok := h.cfg.Service.(object.Snapshotter)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server makes no snapshots.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	name := strings.TrimSpace(r.FormValue("name"))
	switch r.FormValue("action") {
	case "create":
		space := r.FormValue("space")
		if !h.allow(w, r, s, space, auth.Admin) {
			return
		}
		info, err := sn.CreateSnapshot(c, space, name)
		if err != nil {
			h.failErr(w, r, s, err)
			return
		}
		back(w, r, Prefix+"/snapshots", fmt.Sprintf("Snapshot %s shows %s as of %s.", info.Name, info.Space, tstamp.String(info.At)))
	case "delete":
		if !h.allow(w, r, s, name, auth.Admin) {
			return
		}
		if err := sn.DeleteSnapshot(c, name); err != nil {
			h.failErr(w, r, s, err)
			return
		}
		back(w, r, Prefix+"/snapshots", "Removed snapshot "+name+".")
	default:
		h.fail(w, r, s, http.StatusBadRequest, "Unknown action.")
	}
}

func (h *Handler) branches(w http.ResponseWriter, r *http.Request, s *session) {
	br, ok := h.cfg.Service.(object.Brancher)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server makes no branches.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	all, err := br.Branches(c, "")
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	type row struct{ Name, Space, At, Created string }
	var rows []row
	for _, x := range all {
		if h.cfg.Keys.Allowed(s.access, x.Name, auth.Read) {
			rows = append(rows, row{x.Name, x.Space, tstamp.String(x.At), when(x.Created)})
		}
	}
	h.render(w, r, s, http.StatusOK, "branches", map[string]any{"Branches": rows})
}

func (h *Handler) branchAction(w http.ResponseWriter, r *http.Request, s *session) {
	br, ok := h.cfg.Service.(object.Brancher)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server makes no branches.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	name := strings.TrimSpace(r.FormValue("name"))
	switch r.FormValue("action") {
	case "create":
		space := r.FormValue("space")
		// The branch becomes a space of its own: admin on both names.
		if !h.allow(w, r, s, space, auth.Admin) || !h.allow(w, r, s, name, auth.Admin) {
			return
		}
		info, err := br.CreateBranch(c, space, name, "")
		if err != nil {
			h.failErr(w, r, s, err)
			return
		}
		back(w, r, Prefix+"/branches", fmt.Sprintf("Branch %s of %s starts at %s.", info.Name, info.Space, tstamp.String(info.At)))
	case "merge":
		if !h.allow(w, r, s, name, auth.Read) {
			return
		}
		all, err := br.Branches(c, "")
		if err != nil {
			h.failErr(w, r, s, err)
			return
		}
		i := slices.IndexFunc(all, func(b object.BranchInfo) bool { return b.Name == name })
		if i < 0 {
			h.fail(w, r, s, http.StatusNotFound, "No branch "+name+".")
			return
		}
		if !h.allow(w, r, s, all[i].Space, auth.Write) {
			return
		}
		res, err := br.MergeBranch(c, &object.MergeRequest{Branch: name, Strategy: r.FormValue("strategy")})
		if err != nil {
			h.failErr(w, r, s, err)
			return
		}
		if len(res.Conflicts) > 0 {
			var keys []string
			for _, cf := range res.Conflicts {
				keys = append(keys, cf.Key)
			}
			h.fail(w, r, s, http.StatusConflict, fmt.Sprintf("Nothing merged: %d keys changed on both sides (%s). Merge again choosing whose versions win.",
				len(res.Conflicts), strings.Join(keys[:min(len(keys), 10)], ", ")))
			return
		}
		back(w, r, Prefix+"/branches", fmt.Sprintf("Merged %s into %s: %d keys.", name, all[i].Space, res.Applied))
	case "delete":
		if !h.allow(w, r, s, name, auth.Admin) {
			return
		}
		if err := br.DeleteBranch(c, name); err != nil {
			h.failErr(w, r, s, err)
			return
		}
		back(w, r, Prefix+"/branches", "Removed branch "+name+".")
	default:
		h.fail(w, r, s, http.StatusBadRequest, "Unknown action.")
	}
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request, s *session) {
	space, filter, after := r.FormValue("space"), r.FormValue("filter"), r.FormValue("after")
	data := map[string]any{"Space": space, "Filter": filter}
	if space == "" || filter == "" {
		h.render(w, r, s, http.StatusOK, "query", data)
		return
	}
	if !h.allow(w, r, s, space, auth.Read) {
		return
	}
	q, ok := h.cfg.Service.(object.Querier)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server answers no queries.")
		return
	}
	var asOf uint64
	if a := r.FormValue("as_of"); a != "" {
		v, err := parseVersion(a)
		if err != nil {
			h.fail(w, r, s, http.StatusBadRequest, err.Error())
			return
		}
		asOf = v
	}
	c, cancel := ctx(r)
	defer cancel()
	res, err := q.Query(c, &object.QueryRequest{Space: space, Filter: filter, After: after, AsOf: asOf, Limit: pageSize})
	if err != nil {
		data["Error"] = "The query failed: " + errMessage(err)
		h.render(w, r, s, http.StatusBadRequest, "query", data)
		return
	}
	var rows []objectRow
	for _, o := range res.Objects {
		rows = append(rows, infoRow(o))
	}
	data["Objects"], data["Plan"], data["Ranges"], data["Examined"], data["Ran"] = rows, res.Plan, res.Ranges, res.Examined, true
	if res.Truncated {
		data["Next"] = "?" + url.Values{"space": {space}, "filter": {filter}, "after": {res.Next}, "as_of": {tstamp.String(res.AsOf)}}.Encode()
	}
	h.render(w, r, s, http.StatusOK, "query", data)
}

func errMessage(err error) string {
	var oe *object.Error
	if errors.As(err, &oe) && oe.Message != "" {
		return oe.Message
	}
	return err.Error()
}

func (h *Handler) sql(w http.ResponseWriter, r *http.Request, s *session) {
	stmt := r.FormValue("q")
	data := map[string]any{"Statement": stmt}
	if stmt == "" {
		h.render(w, r, s, http.StatusOK, "sql", data)
		return
	}
	run, ok := h.cfg.Service.(object.SQLRunner)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server runs no SQL.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	res, err := run.SQL(c, s.access, stmt, 4<<20)
	if err != nil {
		data["Error"] = "The statement failed: " + errMessage(err)
		h.render(w, r, s, http.StatusBadRequest, "sql", data)
		return
	}
	rows := make([][]string, 0, len(res.Rows))
	for _, row := range res.Rows {
		out := make([]string, len(row))
		for i, c := range row {
			if c == nil {
				out[i] = "NULL"
			} else {
				out[i] = *c
			}
		}
		rows = append(rows, out)
	}
	data["Columns"], data["Rows"], data["Ran"] = res.Columns, rows, true
	h.render(w, r, s, http.StatusOK, "sql", data)
}

func (h *Handler) cluster(w http.ResponseWriter, r *http.Request, s *session) {
	if !h.clusterAdmin(w, r, s) {
		return
	}
	cs, ok := h.cfg.Service.(admin.ClusterService)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server reports no cluster.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	rep, err := clusterReport(c, cs)
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	type nodeRow struct {
		admin.ClusterNode
		Up      string
		Leading bool
	}
	var nodes []nodeRow
	for _, n := range rep.Nodes {
		up := ""
		if !n.Started.IsZero() {
			up = time.Since(n.Started).Round(time.Second).String()
		}
		nodes = append(nodes, nodeRow{ClusterNode: n, Up: up, Leading: n.ID == rep.Oracle})
	}
	type rangeRow struct {
		ID                 uint64
		Space, Start, End  string
		Replicas, Learners string
		Leader             uint64
	}
	var ranges []rangeRow
	for _, rg := range rep.Ranges {
		ranges = append(ranges, rangeRow{ID: rg.ID, Space: rg.Space, Start: printable(rg.Start), End: printable(rg.End),
			Replicas: joinIDs(rg.Replicas), Learners: joinIDs(rg.Learners), Leader: rg.Leader})
	}
	var samples []Sample
	if h.cfg.Stats != nil {
		samples = h.cfg.Stats.Samples()
	}
	h.render(w, r, s, http.StatusOK, "cluster", map[string]any{"Report": rep, "Nodes": nodes, "Ranges": ranges,
		"Charts": h.cfg.Stats != nil, "Latest": lastSample(samples), "Samples": len(samples)})
}

func joinIDs(ids []uint64) string {
	var s []string
	for _, id := range ids {
		s = append(s, strconv.FormatUint(id, 10))
	}
	return strings.Join(s, ", ")
}

// printable shows a range bound's bytes: text where they are text.
func printable(b []byte) string {
	if b == nil {
		return "∞"
	}
	var sb strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, `\x%02x`, c)
		}
	}
	return sb.String()
}

func (h *Handler) keys(w http.ResponseWriter, r *http.Request, s *session) {
	if !h.clusterAdmin(w, r, s) {
		return
	}
	ks, ok := h.cfg.Service.(admin.KeyService)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server manages no keys.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	all, err := ks.ListKeys(c)
	if err != nil {
		h.failErr(w, r, s, err)
		return
	}
	type row struct {
		Access, Grants, Created string
		ClusterAdmin, Self      bool
	}
	var rows []row
	for _, k := range all {
		var g []string
		for sp, p := range k.Grants {
			g = append(g, sp+"="+p)
		}
		sort.Strings(g)
		created := ""
		if k.Created != 0 {
			created = when(k.Created)
		}
		rows = append(rows, row{Access: k.Access, Grants: strings.Join(g, ", "), Created: created, ClusterAdmin: k.ClusterAdmin, Self: k.Access == s.access})
	}
	data := map[string]any{"Keys": rows}
	if nk := r.FormValue("new"); nk != "" {
		data["NewAccess"] = nk
	}
	h.render(w, r, s, http.StatusOK, "keys", data)
}

func (h *Handler) keyAction(w http.ResponseWriter, r *http.Request, s *session) {
	if !h.clusterAdmin(w, r, s) {
		return
	}
	ks, ok := h.cfg.Service.(admin.KeyService)
	if !ok {
		h.fail(w, r, s, http.StatusNotImplemented, "This server manages no keys.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	switch r.FormValue("action") {
	case "create":
		grants := map[string]string{}
		for _, f := range strings.FieldsFunc(r.FormValue("grants"), func(r rune) bool { return r == ',' || r == '\n' }) {
			sp, p, ok := strings.Cut(strings.TrimSpace(f), "=")
			if !ok || auth.Rank(strings.TrimSpace(p)) == 0 {
				h.fail(w, r, s, http.StatusBadRequest, fmt.Sprintf("Grant %q: write SPACE=read|write|admin (or *=read for every space), separated by commas.", f))
				return
			}
			grants[strings.TrimSpace(sp)] = strings.TrimSpace(p)
		}
		k, err := ks.CreateKey(c, admin.KeySpec{Grants: grants, ClusterAdmin: r.FormValue("cluster_admin") == "on"})
		if err != nil {
			h.failErr(w, r, s, err)
			return
		}
		// The secret is shown once, on this answer, never in a URL.
		h.render(w, r, s, http.StatusOK, "newkey", map[string]any{"Access": k.Access, "Secret": k.Secret})
	case "delete":
		access := r.FormValue("access")
		if access == s.access {
			h.fail(w, r, s, http.StatusBadRequest, "You are signed in with this key: delete it from another admin key's session.")
			return
		}
		if err := ks.DeleteKey(c, access); err != nil {
			h.failErr(w, r, s, err)
			return
		}
		back(w, r, Prefix+"/keys", "Deleted key "+access+".")
	default:
		h.fail(w, r, s, http.StatusBadRequest, "Unknown action.")
	}
}
