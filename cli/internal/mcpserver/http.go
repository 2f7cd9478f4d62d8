package mcpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rayito-dev/rayito/dashboard/hostguard"
)

// Path is where the HTTP transport serves MCP.
const Path = "/mcp"

// MaxRequestBytes bounds an HTTP request's body: a write_file of
// MaxWriteBytes in base64, and room for the rest.
const MaxRequestBytes = MaxWriteBytes/3*4 + 1<<20

// Errors of the token file.
var (
	// ErrTokenFile: the token file cannot be used (readable by others, or
	// not a token).
	ErrTokenFile = errors.New("unusable token file")
)

// minTokenLen is the shortest token a token file may hold.
const minTokenLen = 32

// NewToken returns a new bearer token: 32 random bytes, hex.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LoadOrCreateToken returns the token in path, or writes a new one there
// (mode 0600) when path does not exist; created says which. A file that
// others may read, or that holds no token (at least 32 characters of
// A-Z a-z 0-9 - . _ ~ + / =), is an ErrTokenFile.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		token = NewToken()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return "", false, err
		}
		_, werr := io.WriteString(f, token+"\n")
		if cerr := f.Close(); werr != nil || cerr != nil {
			os.Remove(path)
			return "", false, errors.Join(werr, cerr)
		}
		return token, true, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return "", false, fmt.Errorf("%w: %s must be a regular file only its owner can read (chmod 600)", ErrTokenFile, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", false, err
	}
	token = strings.TrimSpace(string(data))
	if !validToken(token) {
		return "", false, fmt.Errorf("%w: %s must hold one token of at least %d characters of A-Z a-z 0-9 - . _ ~ + / =", ErrTokenFile, path, minTokenLen)
	}
	return token, false, nil
}

// validToken: a token68 (RFC 7235) of at least minTokenLen characters.
func validToken(t string) bool {
	if len(t) < minTokenLen || len(t) > 1024 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0) {
			return false
		}
	}
	return true
}

// bearer returns the credentials of an Authorization header of the
// Bearer scheme (the scheme's name in any case, one space).
func bearer(header string) (string, bool) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" || strings.ContainsAny(cred, " \t") {
		return "", false
	}
	return cred, true
}

// tokenOK compares the request's bearer token with want in constant time
// (over their digests, so the length does not show either).
func tokenOK(r *http.Request, want string) bool {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return false
	}
	got, ok := bearer(vals[0])
	if !ok {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// HTTPHandler serves s over MCP's streamable HTTP transport at Path. Every
// request passes guard first (a foreign Host: 421, a foreign Origin: 403,
// the defence against DNS rebinding and other sites' pages), then must
// carry token as a bearer token (401 otherwise).
func HTTPHandler(s *Server, guard *hostguard.Guard, token string) http.Handler {
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      time.Hour,
		MaxRequestBodyBytes: MaxRequestBytes,
		// guard already pins Host and Origin, with the operator's extra
		// names, which the SDK's own localhost check does not know.
		DisableLocalhostProtection: true,
	})
	mux := http.NewServeMux()
	mux.Handle(Path, mh)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := guard.Check(r); code != 0 {
			http.Error(w, http.StatusText(code), code)
			return
		}
		if !tokenOK(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rayito mcp"`)
			http.Error(w, "a bearer token is required (the one rayito mcp printed, or its --token-file)", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
