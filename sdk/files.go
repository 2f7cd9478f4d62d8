package rayito

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Files reads and writes files in a sandbox as its user. rayd refuses
// paths outside what the user may touch (/proc, /etc, symlinks mid-path,
// ...) with a typed error.
type Files struct {
	sbx *Sandbox
}

// FileEndpointThreshold is the size above which Write goes over the HTTP/1.1
// file endpoint instead of an RPC stream on AWS: the AWS endpoint proxy
// gives an HTTP/2 stream a fixed 64 KiB window, which holds one upload to
// well under 1 MB/s, against several MB/s over HTTP/1.1. On the local
// platform every Read and every Write without metadata takes the file
// endpoint: it costs fewer copies than the RPC stream.
const FileEndpointThreshold = 64 << 10

// Entry describes a file, directory or symlink.
type Entry struct {
	Name          string
	Path          string
	Type          string // "file", "dir", "symlink"
	Size          int64
	Mode          uint32
	Permissions   string
	Owner, Group  string
	ModTime       time.Time
	SymlinkTarget string
	Metadata      map[string]string
}

func entryOf(e *raydv1.EntryInfo) *Entry {
	if e == nil {
		return nil
	}
	t := ""
	switch e.GetType() {
	case raydv1.FileType_FILE_TYPE_FILE:
		t = "file"
	case raydv1.FileType_FILE_TYPE_DIRECTORY:
		t = "dir"
	case raydv1.FileType_FILE_TYPE_SYMLINK:
		t = "symlink"
	}
	return &Entry{
		Name: e.GetName(), Path: e.GetPath(), Type: t, Size: e.GetSize(), Mode: e.GetMode(),
		Permissions: e.GetPermissions(), Owner: e.GetOwner(), Group: e.GetGroup(),
		ModTime: time.UnixMilli(e.GetModifiedTimeUnixMs()), SymlinkTarget: e.GetSymlinkTarget(),
		Metadata: e.GetMetadata(),
	}
}

type fileConfig struct {
	user     string
	mode     *uint32
	metadata map[string]string
	url      *urlConfig // UploadURL's and DownloadURL's (transfers.go)
}

// fileOption is a FileOption made of a function.
type fileOption func(*fileConfig)

func (f fileOption) applyFile(c *fileConfig) { f(c) }

// WithMode sets a written file's permission bits.
func WithMode(mode uint32) FileOption { return fileOption(func(c *fileConfig) { c.mode = &mode }) }

func fileOpts(opts []FileOption) *fileConfig {
	c := &fileConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyFile(c)
		}
	}
	return c
}

func (c *fileConfig) userMsg() *raydv1.User {
	if c.user == "" {
		return nil
	}
	return &raydv1.User{Username: c.user}
}

// Read returns a file's content (locally over the HTTP/1.1 file endpoint,
// on AWS over an RPC stream).
func (f *Files) Read(ctx context.Context, path string, opts ...FileOption) (_ []byte, err error) {
	ctx, sp := f.sbx.span(ctx, "Files.Read")
	defer func() { sp.end(err) }()
	if f.PrefersURL(math.MaxInt64) { // transfers are set up: by size
		if b, ok, err := f.readThroughURL(ctx, path, opts); ok {
			return b, err
		}
	}
	if f.sbx.cfg.backend == BackendLocal {
		return f.readHTTP(ctx, path, opts)
	}
	c := fileOpts(opts)
	stream, err := f.sbx.dp.fs.Read(ctx, connect.NewRequest(&raydv1.ReadRequest{Path: path, User: c.userMsg()}))
	if err != nil {
		return nil, rpcErr("read", err)
	}
	defer stream.Close()
	var buf bytes.Buffer
	for stream.Receive() {
		if e := stream.Msg().GetEntry(); e != nil && e.GetSize() > 0 && e.GetSize() < 1<<30 {
			buf.Grow(int(e.GetSize()))
		}
		buf.Write(stream.Msg().GetChunk())
	}
	if err := stream.Err(); err != nil {
		return nil, rpcErr("read", err)
	}
	return buf.Bytes(), nil
}

// ReadStream streams a file over the HTTP/1.1 file endpoint; close it.
func (f *Files) ReadStream(ctx context.Context, path string, opts ...FileOption) (io.ReadCloser, error) {
	resp, err := f.get(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// get answers a GET of the file endpoint with status 200, or an error.
func (f *Files) get(ctx context.Context, path string, opts []FileOption) (*http.Response, error) {
	c := fileOpts(opts)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.fileURL(path, c), nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.sbx.dp.files.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rayito: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, httpErr("read", resp)
	}
	return resp, nil
}

// readHTTP reads a whole file over the file endpoint.
func (f *Files) readHTTP(ctx context.Context, path string, opts []FileOption) ([]byte, error) {
	resp, err := f.get(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n < 1<<30 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, fmt.Errorf("rayito: read: %w", err)
	}
	return buf.Bytes(), nil
}

// Write writes data to path atomically (parents are created). Data above
// FileEndpointThreshold (any data, locally) goes over the HTTP/1.1 file
// endpoint, its metadata (WithMetadata) as X-Metadata-<key> headers; only
// a metadata value a header would not keep as it is (leading or trailing
// blanks) takes the RPC stream.
func (f *Files) Write(ctx context.Context, path string, data []byte, opts ...FileOption) (_ *Entry, err error) {
	ctx, sp := f.sbx.span(ctx, "Files.Write")
	defer func() { sp.end(err) }()
	c := fileOpts(opts)
	if f.PrefersURL(int64(len(data))) { // transfers.go
		h := sha256.Sum256(data)
		return f.UploadThroughURL(ctx, path, bytes.NewReader(data), int64(len(data)), append(opts, WithExpectedSHA256(hex.EncodeToString(h[:])))...)
	}
	if headerSafe(c.metadata) && (len(data) > FileEndpointThreshold || f.sbx.cfg.backend == BackendLocal) {
		return f.WriteStream(ctx, path, bytes.NewReader(data), opts...)
	}
	entries, err := f.WriteMany(ctx, []WriteEntry{{Path: path, Data: data, Mode: c.mode, Metadata: c.metadata}}, opts...)
	if err != nil {
		return nil, err
	}
	return &entries[0], nil
}

// WriteEntry is one file of WriteMany.
type WriteEntry struct {
	Path     string
	Data     []byte
	Mode     *uint32
	Metadata map[string]string
}

// writeChunk is the chunk size of the Write stream (rayd takes ≤ 1 MiB).
const writeChunk = 1 << 20

// WriteMany writes several files in one call, each atomically.
func (f *Files) WriteMany(ctx context.Context, files []WriteEntry, opts ...FileOption) ([]Entry, error) {
	if len(files) == 0 {
		return nil, nil
	}
	c := fileOpts(opts)
	stream := f.sbx.dp.fs.Write(ctx)
	for _, fe := range files {
		path := fe.Path
		first := &raydv1.WriteRequest{Path: &path, User: c.userMsg(), Mode: fe.Mode, Metadata: fe.Metadata}
		data := fe.Data
		n := min(len(data), writeChunk)
		first.Chunk = data[:n]
		if err := stream.Send(first); err != nil {
			break // the error comes with CloseAndReceive
		}
		for data = data[n:]; len(data) > 0; data = data[n:] {
			n = min(len(data), writeChunk)
			if err := stream.Send(&raydv1.WriteRequest{Chunk: data[:n]}); err != nil {
				break
			}
		}
	}
	resp, err := stream.CloseAndReceive()
	if err != nil {
		return nil, rpcErr("write", err)
	}
	out := make([]Entry, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, *entryOf(e))
	}
	return out, nil
}

// WriteStream writes r to path atomically over the HTTP/1.1 file endpoint
// (WithMetadata as X-Metadata-<key> headers).
func (f *Files) WriteStream(ctx context.Context, path string, r io.Reader, opts ...FileOption) (*Entry, error) {
	c := fileOpts(opts)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, f.fileURL(path, c), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	for k, v := range c.metadata {
		req.Header.Set(metadataHeaderPrefix+k, v)
	}
	resp, err := f.sbx.dp.files.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rayito: write: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpErr("write", resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var info raydv1.EntryInfo
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("rayito: write: malformed answer")
	}
	return entryOf(&info), nil
}

// metadataHeaderPrefix starts the headers that carry a written file's
// metadata on the file endpoint (rayd's PUT /files and envd's upload).
const metadataHeaderPrefix = "X-Metadata-"

// headerSafe reports whether every metadata value survives as a header
// value: HTTP trims leading and trailing blanks (rayd refuses what is not
// printable ASCII either way).
func headerSafe(md map[string]string) bool {
	for _, v := range md {
		if strings.TrimSpace(v) != v {
			return false
		}
	}
	return true
}

func (f *Files) fileURL(path string, c *fileConfig) string {
	q := url.Values{"path": {path}}
	if c.user != "" {
		q.Set("user", c.user)
	}
	if c.mode != nil {
		q.Set("mode", strconv.FormatUint(uint64(*c.mode), 8))
	}
	return f.sbx.dp.baseURL + "/files?" + q.Encode()
}

// httpErr maps an error answer of the file endpoint (rayd's JSON
// {code, message, reason}) to an *RPCError; without a body the status
// decides, through Connect's code↔HTTP table.
func httpErr(op string, resp *http.Response) error {
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	var cc connect.Code
	code := CodeUnknown
	if err := cc.UnmarshalText([]byte(body.Code)); err == nil {
		code = codeOf(cc)
	} else {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			code = CodeUnauthenticated
		case http.StatusForbidden:
			code = CodePermissionDenied
		case http.StatusNotFound:
			code = CodeNotFound
		case http.StatusBadRequest:
			code = CodeInvalidArgument
		case http.StatusTooManyRequests:
			code = CodeResourceExhausted
		case http.StatusConflict:
			code = CodeAlreadyExists
		default:
			code = CodeInternal
		}
	}
	reason := ReasonUnspecified
	if v, ok := raydv1.ErrorReason_value[body.Reason]; ok {
		reason = reasonOfWire[raydv1.ErrorReason(v)]
	}
	if reason == ReasonUnspecified {
		reason = reasonOfCode(code)
	}
	if body.Message == "" {
		body.Message = http.StatusText(resp.StatusCode)
	}
	return &RPCError{Op: op, Code: code, Reason: reason, Message: body.Message}
}

// Stat describes path; errors.Is(err, ErrNotFound) when it does not exist.
func (f *Files) Stat(ctx context.Context, path string, opts ...FileOption) (*Entry, error) {
	c := fileOpts(opts)
	resp, err := f.sbx.dp.fs.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: path, User: c.userMsg()}))
	if err != nil {
		return nil, rpcErr("stat", err)
	}
	return entryOf(resp.Msg.GetEntry()), nil
}

// Exists reports whether path exists.
func (f *Files) Exists(ctx context.Context, path string, opts ...FileOption) (bool, error) {
	_, err := f.Stat(ctx, path, opts...)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// List lists a directory to depth levels (0 means 1).
func (f *Files) List(ctx context.Context, path string, depth int, opts ...FileOption) ([]Entry, error) {
	c := fileOpts(opts)
	resp, err := f.sbx.dp.fs.ListDir(ctx, connect.NewRequest(&raydv1.ListDirRequest{Path: path, Depth: uint32(max(depth, 0)), User: c.userMsg()}))
	if err != nil {
		return nil, rpcErr("list", err)
	}
	out := make([]Entry, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, *entryOf(e))
	}
	return out, nil
}

// MakeDir creates a directory and its parents.
func (f *Files) MakeDir(ctx context.Context, path string, opts ...FileOption) (*Entry, error) {
	c := fileOpts(opts)
	resp, err := f.sbx.dp.fs.MakeDir(ctx, connect.NewRequest(&raydv1.MakeDirRequest{Path: path, User: c.userMsg()}))
	if err != nil {
		return nil, rpcErr("make dir", err)
	}
	return entryOf(resp.Msg.GetEntry()), nil
}

// Rename moves src to dst.
func (f *Files) Rename(ctx context.Context, src, dst string, opts ...FileOption) (*Entry, error) {
	c := fileOpts(opts)
	resp, err := f.sbx.dp.fs.Move(ctx, connect.NewRequest(&raydv1.MoveRequest{Source: src, Destination: dst, User: c.userMsg()}))
	if err != nil {
		return nil, rpcErr("rename", err)
	}
	return entryOf(resp.Msg.GetEntry()), nil
}

// Remove removes path; directories need recursive.
func (f *Files) Remove(ctx context.Context, path string, recursive bool, opts ...FileOption) error {
	c := fileOpts(opts)
	_, err := f.sbx.dp.fs.Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: path, Recursive: recursive, User: c.userMsg()}))
	return rpcErr("remove", err)
}
