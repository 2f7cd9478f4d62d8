package image

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

const (
	testBucket = "rayito-artifacts"
	testRole   = "arn:aws:iam::123456789012:role/rayito-build"
)

// world is one test's AWS: the scripted MicroVMs fake and an in-process
// S3 (gofakes3, path-style), reached through the environment the AWS SDK
// reads, as a user's shell would set it.
type world struct {
	t   *testing.T
	mv  *microvmstest.Server
	s3  *s3mem.Backend
	dir string // an image source tree

	mu    sync.Mutex
	s3Req []string // "METHOD PATH"
	s3Put []http.Header
	// headForbidden answers every HEAD with 403, as S3 does for a missing
	// key to a principal without s3:ListBucket.
	headForbidden bool
}

func newWorld(t *testing.T, polls int) *world {
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
	w := &world{t: t, mv: mv, s3: s3mem.New()}
	if err := w.s3.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(w.s3, gofakes3.WithLogger(gofakes3.DiscardLog()))
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
	awsEnv(t, mv.URL(), ts.URL)

	old1, old2 := pollFirst, pollMax
	pollFirst, pollMax = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { pollFirst, pollMax = old1, old2 })

	w.dir = filepath.Join(t.TempDir(), "image")
	writeTree(t, w.dir, map[string]string{
		"Dockerfile.in":     "FROM public.ecr.aws/lambda/microvms:al2023-minimal@sha256:@@BASE_DIGEST@@\nCOPY a.txt /a.txt\n",
		"base.digest":       "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
		"requirements.lock": "ipykernel==6.29.5 --hash=sha256:abababababababababababababababababababababababababababababababab\n",
		"a.txt":             "a\n",
	})
	return w
}

// awsEnv points the AWS SDK's configuration at the fakes, with the fake's
// credentials and nothing from this machine.
func awsEnv(t *testing.T, lambda, s3 string) {
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

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// result is one run of the CLI.
type result struct {
	out, err string
	code     int
}

// run runs `rayito image ARGS...` in process, with env as the CLI's own
// environment (Factory.Env; the AWS SDK reads the process's).
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, Env: func(k string) string { return env[k] }}
	root := &cli.Command{
		Name: "rayito", Writer: &out, ErrWriter: &errb,
		Commands:       []*cli.Command{Command(f)},
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.Run(ctx, append([]string{"rayito", "image"}, args...))
	msg, code := cliutil.Exit(err)
	if msg != "" {
		errb.WriteString("rayito: " + msg + "\n")
	}
	return result{out.String(), errb.String(), code}
}

func (w *world) run(args ...string) result {
	w.t.Helper()
	return run(w.t, nil, args...)
}

// puts counts the S3 PUTs so far.
func (w *world) puts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.s3Req {
		if strings.HasPrefix(r, "PUT ") {
			n++
		}
	}
	return n
}

// ops lists the control-plane operations so far.
func (w *world) ops() []string {
	var ops []string
	for _, r := range w.mv.Requests() {
		ops = append(ops, string(r.Op))
	}
	return ops
}
