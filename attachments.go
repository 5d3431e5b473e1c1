package toolrun

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

var unsafeRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// localizeText rewrites a child's text for its parent: the child's own
// "Attachment path for …" lines of copied files go (the parent's result
// gets lines with its own paths), and any other mention of a copied file's
// child path becomes the parent's path.
func localizeText(text string, from, to []AttachmentRef) string {
	if len(from) == 0 {
		return text
	}
	byPath := map[string]string{}
	for i := range from {
		if i < len(to) {
			byPath[from[i].Path] = to[i].Path
		}
	}
	lines := strings.Split(text, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(l, "Attachment path for ") {
			if i := strings.LastIndex(l, ": "); i >= 0 {
				if _, ok := byPath[l[i+2:]]; ok {
					continue
				}
			}
		}
		kept = append(kept, l)
	}
	text = strings.TrimRight(strings.Join(kept, "\n"), "\n")
	for old, nu := range byPath {
		text = strings.ReplaceAll(text, old, nu)
	}
	return text
}

// refScanLimit bounds the messages refsForPaths reads.
const refScanLimit = 500

// refsForPaths turns attachment paths given as tool arguments into refs:
// the ref a message of the thread carries for that path (its original name,
// MIME type and dimensions), else one made from the path. Only the newest
// refScanLimit messages are searched.
func (rt *Runtime) refsForPaths(ctx context.Context, threadID string, paths []string) []AttachmentRef {
	if len(paths) == 0 {
		return nil
	}
	known := map[string]AttachmentRef{}
	if p, err := rt.store.ListMessages(ctx, threadID, MessageQuery{Limit: refScanLimit, Order: OrderDesc, IncludeSilent: true, MaxDepth: -1}); err == nil {
		for i := range p.Messages {
			for _, a := range p.Messages[i].Attachments {
				if _, ok := known[a.Path]; !ok {
					known[a.Path] = a
				}
			}
		}
	}
	out := make([]AttachmentRef, 0, len(paths))
	for _, p := range paths {
		r, ok := known[p]
		if !ok {
			r = AttachmentRef{Type: "file", Path: p, Name: path.Base(p)}
		}
		out = append(out, r)
	}
	return out
}

// copyAttachments copies thread files into another thread under
// receiver-local paths and returns the new refs: each keeps
// its ref's name, MIME type and dimensions, and gets the receiver's path
// and a new id. Files that do not exist are skipped.
func (rt *Runtime) copyAttachments(ctx context.Context, from, to string, refs []AttachmentRef) []AttachmentRef {
	var out []AttachmentRef
	for _, r := range refs {
		src := CleanPath(r.Path)
		data, info, err := rt.store.ReadFile(ctx, from, src)
		if err != nil {
			continue
		}
		name := r.Name
		if name == "" {
			name = path.Base(src)
		}
		ext := path.Ext(name)
		stem := strings.Trim(unsafeRE.ReplaceAllString(strings.TrimSuffix(name, ext), "-"), "-")
		if stem == "" {
			stem = "asset"
		}
		if len(stem) > 64 {
			stem = stem[:64]
		}
		if ext == "" || len(ext) > 17 || unsafeRE.MatchString(ext) {
			ext = "." + attachmentExt(Attachment{Name: src, MimeType: info.MimeType})
		}
		mime := info.MimeType
		if mime == "" || mime == "application/octet-stream" && r.MimeType != "" {
			mime = r.MimeType
		}
		dst := "/attachments/" + stem + "-" + randomHex(4) + ext
		ni, err := rt.store.writeFile(ctx, to, dst, data, mime)
		if err != nil {
			rt.log.WarnContext(ctx, "toolrun: copying an attachment", "from", from, "to", to, "path", src, "error", err)
			continue
		}
		out = append(out, AttachmentRef{ID: newRecordID("att"), Type: "file", Path: dst, Name: name, MimeType: mime, Size: ni.Size,
			Width: r.Width, Height: r.Height, Description: r.Description})
	}
	return out
}

func pathsOf(v []any) []string { return attachmentPaths(any(v)) }

func (e *Executor) writeAttachment(ctx context.Context, threadID string, a Attachment) (AttachmentRef, error) {
	if a.Name == "" {
		return AttachmentRef{}, errors.New("attachment has no name")
	}
	mt := a.MimeType
	if mt == "" {
		mt = "application/octet-stream"
	}
	p := fmt.Sprintf("/attachments/%d-%s.%s", time.Now().UnixMilli(), randomHex(4), attachmentExt(a))
	info, err := e.store.writeFile(context.WithoutCancel(ctx), threadID, p, a.Data, mt)
	if err != nil {
		return AttachmentRef{}, err
	}
	return AttachmentRef{ID: newRecordID("att"), Type: "file", Path: p, Name: a.Name, MimeType: mt, Size: info.Size, Width: a.Width, Height: a.Height}, nil
}

// attachmentExt picks a file extension from the MIME type, else the name.
func attachmentExt(a Attachment) string {
	switch strings.ToLower(a.MimeType) {
	case "image/png":
		return "png"
	case "image/jpeg", "image/jpg":
		return "jpg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	}
	if i := strings.LastIndexByte(a.Name, '.'); i >= 0 && i < len(a.Name)-1 {
		ext := strings.ToLower(a.Name[i+1:])
		ok := len(ext) <= 16
		for _, r := range ext {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				ok = false
			}
		}
		if ok {
			return ext
		}
	}
	return "bin"
}

// attachmentPaths reads one path or an array of paths, cleaned, keeping
// only those under /attachments/. The prefix is checked on the cleaned
// path, so "/attachments/../notes.md" is not kept.
func attachmentPaths(v any) []string {
	var in []any
	switch x := v.(type) {
	case string:
		in = []any{x}
	case []any:
		in = x
	}
	var out []string
	for _, p := range in {
		if s, ok := p.(string); ok {
			if c := CleanPath(s); strings.HasPrefix(c, "/attachments/") {
				out = append(out, c)
			}
		}
	}
	return out
}
