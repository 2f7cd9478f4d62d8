package files

import (
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"

	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// HTTPPath is where the HTTP/1.1 file endpoints are mounted on the API port.
const HTTPPath = "/files"

// HTTPHandler serves the file endpoints for large transfers. It does not
// check the access token itself: apiserver mounts it behind the same gate
// as the RPCs (auth.Interceptor.Handler, header x-access-token).
//
//	GET /files?path=<p>[&user=<u>]                streams the file
//	PUT /files?path=<p>[&user=<u>][&mode=<octal>] replaces it with the body
//
// GET answers application/octet-stream with Content-Length, or gzip when
// the request accepts it. PUT accepts a gzip body (Content-Encoding: gzip)
// and answers the new EntryInfo as JSON. Errors are rpcerr.HTTPError JSON
// {"code": "<connect code>", "message": "<fixed text>", "reason":
// "<ErrorReason name>"} with Connect's HTTP status for the code.
func (s *Service) HTTPHandler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Service) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.httpGet(w, r)
	case http.MethodPut:
		s.httpPut(w, r)
	default:
		w.Header().Set("Allow", "GET, PUT")
		rpcerr.WriteHTTPStatus(w, http.StatusMethodNotAllowed, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, "method not allowed"))
	}
}

func (s *Service) httpGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	u, err := s.userNamed(q.Get("user"))
	if err != nil {
		httpError(w, err)
		return
	}
	s.SendFile(w, r, u, q.Get("path"), httpError)
}

// SendFile answers a GET of the file p as the user u: the bytes as
// application/octet-stream with Content-Length, or gzip when r accepts it.
// An error before the first byte (mapped through rpcerr.From) goes to
// fail; one during the body cuts the response. The E2B envd endpoint
// (service/envdhttp) shares it.
func (s *Service) SendFile(w http.ResponseWriter, r *http.Request, u safefs.User, p string, fail func(http.ResponseWriter, error)) {
	rc, e, err := s.fs.ReadFile(r.Context(), u, p)
	if err != nil {
		fail(w, rpcerr.From(err))
		return
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if _, err := io.Copy(gz, io.LimitReader(rc, e.Size)); err != nil {
			panic(http.ErrAbortHandler)
		}
		if err := gz.Close(); err != nil {
			panic(http.ErrAbortHandler)
		}
		return
	}
	h.Set("Content-Length", strconv.FormatInt(e.Size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.CopyN(w, rc, e.Size); err != nil {
		// The file shrank or the client left: cut the response so the
		// client sees a short body rather than a silently wrong one.
		panic(http.ErrAbortHandler)
	}
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		p := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		if qv, ok := strings.CutPrefix(p, "q="); ok {
			if f, err := strconv.ParseFloat(qv, 64); err == nil && f == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// bodyReader remembers the error of the request body (client gone, bad
// gzip), which safefs reports only as reason "source".
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func (s *Service) httpPut(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	mode, err := parseMode(q.Get("mode"))
	if err != nil {
		httpError(w, err)
		return
	}
	u, err := s.userNamed(q.Get("user"))
	if err != nil {
		httpError(w, err)
		return
	}
	e, err := s.ReceiveFile(r.Context(), u, q.Get("path"), r.Body, r.Header.Get("Content-Encoding"), mode, MetadataHeaders(r.Header))
	if err != nil {
		httpError(w, err)
		return
	}
	out, err := protojson.Marshal(entryInfo(e))
	if err != nil {
		httpError(w, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "cannot encode the entry"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// MetadataHeaderPrefix starts the request headers that carry a written
// file's metadata, X-Metadata-<key>: <value>, on rayd's PUT /files and on
// envd's upload alike.
const MetadataHeaderPrefix = "X-Metadata-"

// MetadataHeaders collects the X-Metadata-<key> headers of a write (keys
// lowercased: header names are case-insensitive, and metadata keys are
// lower case); nil when there are none. ReceiveFile validates them.
func MetadataHeaders(hdr http.Header) map[string]string {
	var md map[string]string
	prefix := strings.ToLower(MetadataHeaderPrefix)
	for k, vs := range hdr {
		key, ok := strings.CutPrefix(strings.ToLower(k), prefix)
		if !ok || key == "" || len(vs) == 0 {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = vs[0]
	}
	return md
}

// ReceiveFile atomically replaces the file p, as the user u, with body
// decoded by its Content-Encoding (identity or gzip): nothing is left of a
// failed upload, and the old file stays intact. The decompressed size is
// bounded by the disk reserve, which safefs checks before every chunk it
// writes. Errors are Connect errors (rpcerr). The E2B envd endpoint
// (service/envdhttp) shares it.
func (s *Service) ReceiveFile(ctx context.Context, u safefs.User, p string, body io.Reader, contentEncoding string, mode os.FileMode, md map[string]string) (safefs.Entry, error) {
	switch enc := strings.ToLower(strings.TrimSpace(contentEncoding)); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		gz, err := gzip.NewReader(body)
		if err != nil {
			return safefs.Entry{}, rpcerr.Invalid("invalid gzip body")
		}
		defer gz.Close()
		body = gz
	default:
		return safefs.Entry{}, rpcerr.Invalid("unsupported Content-Encoding")
	}
	if err := safefs.ValidateMetadata(md); err != nil {
		return safefs.Entry{}, rpcerr.From(err)
	}
	src := &bodyReader{r: body}
	e, err := s.fs.WriteFile(ctx, u, p, src, mode, md)
	if err != nil {
		if src.err != nil {
			var corrupt flate.CorruptInputError
			if errors.Is(src.err, gzip.ErrChecksum) || errors.Is(src.err, gzip.ErrHeader) || errors.As(src.err, &corrupt) || errors.Is(src.err, io.ErrUnexpectedEOF) {
				return safefs.Entry{}, rpcerr.Invalid("invalid or truncated body")
			}
			return safefs.Entry{}, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_CANCELED, "request body failed")
		}
		return safefs.Entry{}, rpcerr.From(err)
	}
	return e, nil
}

// httpError answers err through rpcerr: Connect's code↔HTTP table and a
// JSON body with the code, the fixed message and the ErrorInfo reason.
func httpError(w http.ResponseWriter, err error) { rpcerr.WriteHTTP(w, err) }
