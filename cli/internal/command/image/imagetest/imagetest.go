// Package imagetest is the AWS of the image and template commands'
// tests: the scripted MicroVMs fake (sdk/microvms/microvmstest) and an
// in-process S3 (gofakes3), reached through the environment the AWS SDK
// reads, as a user's shell would set it. Tests only.
package imagetest

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"

	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// The bucket every World has, and a build role.
const (
	Bucket = "rayito-artifacts"
	Role   = "arn:aws:iam::123456789012:role/rayito-build"
)

// World is one test's AWS.
type World struct {
	MV *microvmstest.Server
	S3 *s3mem.Backend
	// Dir is an image source tree (Dockerfile.in ending in CMD, digest,
	// lock, a.txt).
	Dir string

	mu    sync.Mutex
	s3Req []string // "METHOD PATH"
	s3Put []http.Header
	// headForbidden answers every HEAD with 403, as S3 does for a missing
	// key to a principal without s3:ListBucket.
	headForbidden bool
}

// New starts a World whose image builds take polls Get calls, and points
// the process's AWS environment at it for the test.
func New(t *testing.T, polls int) *World {
	t.Helper()
	// The CLI polls every few milliseconds here: no server-side throttling.
	rates := map[microvms.Operation]float64{}
	for _, op := range []microvms.Operation{
		microvms.OpCreateMicrovmImage, microvms.OpUpdateMicrovmImage, microvms.OpGetMicrovmImage,
		microvms.OpListMicrovmImages, microvms.OpGetMicrovmImageVersion, microvms.OpListMicrovmImageVersions,
		microvms.OpDeleteMicrovmImageVersion, microvms.OpListMicrovmImageBuilds, microvms.OpTagResource,
		microvms.OpListTags, microvms.OpListMicrovms,
	} {
		rates[op] = 0
	}
	mv, err := microvmstest.New(microvmstest.Options{Polls: polls, Rates: rates})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mv.Close)
	w := &World{MV: mv, S3: s3mem.New()}
	if err := w.S3.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(w.S3, gofakes3.WithLogger(gofakes3.DiscardLog()))
	h := faker.Server()
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.s3Req = append(w.s3Req, r.Method+" "+r.URL.Path)
		if r.Method == http.MethodPut {
			w.s3Put = append(w.s3Put, r.Header.Clone())
		}
		forbid := w.headForbidden && r.Method == http.MethodHead
		w.mu.Unlock()
		if forbid {
			rw.WriteHeader(http.StatusForbidden)
			return
		}
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(ts.Close)
	AWSEnv(t, mv.URL(), ts.URL)

	w.Dir = filepath.Join(t.TempDir(), "image")
	WriteTree(t, w.Dir, map[string]string{
		"Dockerfile.in":     "FROM public.ecr.aws/lambda/microvms:al2023-minimal@sha256:@@BASE_DIGEST@@\nCOPY a.txt /a.txt\n",
		"base.digest":       "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
		"requirements.lock": "ipykernel==6.29.5 --hash=sha256:abababababababababababababababababababababababababababababababab\n",
		"a.txt":             "a\n",
	})
	return w
}

// AWSEnv points the AWS SDK's configuration at the fakes, with the fake's
// credentials and nothing from this machine.
func AWSEnv(t *testing.T, lambda, s3 string) {
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME":                        home,
		"AWS_CONFIG_FILE":             filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_ACCESS_KEY_ID":           microvmstest.DefaultAccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       microvmstest.DefaultSecretAccessKey,
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  microvmstest.DefaultRegion,
		"AWS_DEFAULT_REGION":          "",
		"AWS_ENDPOINT_URL":            lambda,
		"AWS_ENDPOINT_URL_LAMBDA":     "",
		"AWS_ENDPOINT_URL_S3":         s3,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_MAX_ATTEMPTS":            "1",
	} {
		t.Setenv(k, v)
		if v == "" {
			os.Unsetenv(k)
		}
	}
}

// WriteTree writes files (slash-separated names) under dir.
func WriteTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// SetHeadForbidden makes S3 answer every HEAD with 403.
func (w *World) SetHeadForbidden(v bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.headForbidden = v
}

// S3Requests lists the S3 requests so far ("METHOD PATH").
func (w *World) S3Requests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.s3Req...)
}

// S3Puts lists the headers of the S3 PUTs so far.
func (w *World) S3Puts() []http.Header {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]http.Header(nil), w.s3Put...)
}

// Puts counts the S3 PUTs so far.
func (w *World) Puts() int {
	n := 0
	for _, r := range w.S3Requests() {
		if strings.HasPrefix(r, "PUT ") {
			n++
		}
	}
	return n
}

// Ops lists the control-plane operations so far.
func (w *World) Ops() []string {
	var ops []string
	for _, r := range w.MV.Requests() {
		ops = append(ops, string(r.Op))
	}
	return ops
}

// Result is one run of the CLI: its stdout, its stderr (with the
// "rayito: " line of its error) and its exit code.
type Result struct {
	Out, Err string
	Code     int
}

// Run runs `rayito NAME ARGS...` in process, NAME being the command group
// command makes, with getenv as the CLI's own environment (Factory.Env;
// the AWS SDK reads the process's).
func Run(t *testing.T, command func(*cliutil.Factory) *cli.Command, getenv func(string) string, args ...string) Result {
	t.Helper()
	var out, errb bytes.Buffer
	f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, Env: getenv}
	group := command(f)
	root := &cli.Command{
		Name: "rayito", Writer: &out, ErrWriter: &errb,
		Commands:       []*cli.Command{group},
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.Run(ctx, append([]string{"rayito", group.Name}, args...))
	msg, code := cliutil.Exit(err)
	if msg != "" {
		errb.WriteString("rayito: " + msg + "\n")
	}
	return Result{out.String(), errb.String(), code}
}
