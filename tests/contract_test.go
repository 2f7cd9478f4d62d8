package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

// TestContract checks rayd's RPC contract (rayito.rayd.v1) from outside
// our Go code: the real rayd binary, driven by `buf curl` (the pinned buf,
// `make tools`) with JSON bodies and the schema taken from the .proto
// files, over Connect, gRPC and gRPC-Web. It needs neither root nor the
// local platform; as root, rayd runs commands and file operations as uid
// 1000.
func TestContract(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rayd binary")
	}
	c := startContractRayd(t)

	// The three protocols, each over h2c: --http2-prior-knowledge, which
	// buf curl implies for gRPC on an http URL (gRPC needs HTTP/2); without
	// it Connect and gRPC-Web go over HTTP/1.1.
	protocols := []string{"connect", "grpc", "grpcweb"}
	each := func(t *testing.T, f func(t *testing.T, v curlVariant)) {
		for _, p := range protocols {
			t.Run(p, func(t *testing.T) { f(t, curlVariant{protocol: p, h2: true}) })
		}
	}
	start := `{"process":{"cmd":"sh","args":["-c","echo hi; echo oops >&2; exit 3"]}}`

	t.Run("Health", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			r := c.curl(t, v, "", "HealthService/Health", `{}`)
			h := r.single(t)
			if h["agentReady"] != true || h["sandboxId"] != contractSandboxID {
				t.Fatalf("health %v", h)
			}
			if s, _ := h["agentVersion"].(string); s == "" {
				t.Fatalf("agentVersion %v", h["agentVersion"])
			}
			// uint64 is a JSON string in the canonical protobuf mapping.
			if s, ok := h["uptimeMs"].(string); !ok {
				t.Fatalf("uptimeMs %#v is not a JSON string", h["uptimeMs"])
			} else if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				t.Fatalf("uptimeMs %q: %v", s, err)
			}
			if n, _ := h["cpuCount"].(float64); n < 1 {
				t.Fatalf("cpuCount %v", h["cpuCount"])
			}
			if md, _ := h["metadata"].(map[string]any); md["suite"] != "contract" {
				t.Fatalf("metadata %v", h["metadata"])
			}
			services, _ := contractPath(h, "features", "services").([]any)
			if !contractContains(services, "process") || !contractContains(services, "files") {
				t.Fatalf("features.services %v", services)
			}
		})
	})

	checkStart := func(t *testing.T, r curlResult) {
		t.Helper()
		r.ok(t)
		if len(r.msgs) < 2 {
			t.Fatalf("%d messages: %s", len(r.msgs), r.stdout)
		}
		if pid, _ := contractPath(r.msgs[0], "start", "pid").(float64); pid <= 0 {
			t.Fatalf("first message %v, want start with a pid", r.msgs[0])
		}
		var stdout, stderr strings.Builder
		var end map[string]any
		for i, m := range r.msgs {
			if d, ok := m["data"].(map[string]any); ok {
				if _, ok := d["seq"].(string); !ok {
					t.Fatalf("data.seq %#v is not a JSON string (uint64)", d["seq"])
				}
				stdout.WriteString(contractB64(t, d["stdout"]))
				stderr.WriteString(contractB64(t, d["stderr"]))
			}
			if e, ok := m["end"].(map[string]any); ok {
				if i != len(r.msgs)-1 {
					t.Fatalf("end is message %d of %d", i+1, len(r.msgs))
				}
				end = e
			}
		}
		if stdout.String() != "hi\n" || stderr.String() != "oops\n" {
			t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
		}
		if end == nil || end["exitCode"] != float64(3) || end["exited"] != true || end["status"] != "exited" {
			t.Fatalf("end %v; stream:\n%s", end, r.stdout)
		}
	}

	t.Run("Start", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			checkStart(t, c.curl(t, v, c.token, "ProcessService/Start", start))
		})
	})

	// Connect and gRPC-Web also work over HTTP/1.1 (buf curl's default for
	// http URLs), which is what the SDK uses locally.
	t.Run("StartHTTP1", func(t *testing.T) {
		for _, p := range []string{"connect", "grpcweb"} {
			t.Run(p, func(t *testing.T) {
				checkStart(t, c.curl(t, curlVariant{protocol: p}, c.token, "ProcessService/Start", start))
			})
		}
	})

	otherToken, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token string }{
		{"NoToken", ""},
		{"WrongToken", otherToken},
		{"MalformedToken", "not a token"},
	} {
		t.Run("Start"+tc.name, func(t *testing.T) {
			each(t, func(t *testing.T, v curlVariant) {
				r := c.curl(t, v, tc.token, "ProcessService/Start", start)
				r.rpcError(t, "unauthenticated", "access token")
				if len(r.msgs) != 0 {
					t.Fatalf("messages before the error: %s", r.stdout)
				}
			})
		})
	}

	// A directory every uid can read: as root rayd acts as uid 1000, which
	// need not be in /etc/passwd, so neither its home nor a 0700 temp dir
	// will do.
	dir := contractDir(t)
	t.Run("StatDir", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			e, _ := c.curl(t, v, c.token, "FilesystemService/Stat", fmt.Sprintf(`{"path":%q}`, dir)).single(t)["entry"].(map[string]any)
			if e["type"] != "FILE_TYPE_DIRECTORY" || e["path"] != dir || e["name"] != filepath.Base(dir) ||
				e["permissions"] != "drwxr-xr-x" || e["mode"] != float64(0o40755) {
				t.Fatalf("entry %v", e)
			}
		})
	})
	t.Run("StatFile", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			e, _ := c.curl(t, v, c.token, "FilesystemService/Stat", fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "hello.txt"))).single(t)["entry"].(map[string]any)
			// int64 size is a JSON string.
			if e["type"] != "FILE_TYPE_FILE" || e["size"] != "6" || e["permissions"] != "-rw-r--r--" {
				t.Fatalf("entry %v", e)
			}
		})
	})
	t.Run("ListDir", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			entries, _ := c.curl(t, v, c.token, "FilesystemService/ListDir", fmt.Sprintf(`{"path":%q}`, dir)).single(t)["entries"].([]any)
			got := map[string]string{}
			for _, x := range entries {
				e, _ := x.(map[string]any)
				name, _ := e["name"].(string)
				typ, _ := e["type"].(string)
				got[name] = typ
				if e["path"] != filepath.Join(dir, name) {
					t.Fatalf("entry %v not under %s", e, dir)
				}
			}
			if len(got) != 2 || got["hello.txt"] != "FILE_TYPE_FILE" || got["sub"] != "FILE_TYPE_DIRECTORY" {
				t.Fatalf("entries %v", entries)
			}
		})
	})
	t.Run("StatMissing", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			missing := filepath.Join(dir, "missing")
			r := c.curl(t, v, c.token, "FilesystemService/Stat", fmt.Sprintf(`{"path":%q}`, missing))
			r.rpcError(t, "not_found", "")
			if strings.Contains(r.errMessage, dir) {
				t.Fatalf("error message %q names the path", r.errMessage)
			}
		})
	})

	// The lifecycle and metrics RPCs over every protocol: a sandbox
	// started without a lifecycle block has no deadline to move, and
	// Metrics describes the sandbox.
	t.Run("SetTimeoutUnmanaged", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			c.curl(t, v, c.token, "LifecycleService/SetTimeout", `{"timeoutMs":"60000","mode":"TIMEOUT_MODE_EXACT"}`).rpcError(t, "failed_precondition", "")
		})
	})
	t.Run("SetTimeoutInvalid", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			c.curl(t, v, c.token, "LifecycleService/SetTimeout", `{"timeoutMs":"0","mode":"TIMEOUT_MODE_EXACT"}`).rpcError(t, "invalid_argument", "")
		})
	})
	t.Run("Metrics", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			m := c.curl(t, v, c.token, "HealthService/Metrics", `{}`).single(t)
			if m["cpuCount"] == nil || m["timestampUnixMs"] == nil {
				t.Fatalf("metrics %v", m)
			}
		})
	})

	// The network policy over every protocol: this rayd shares the test's
	// network namespace (no -isolation), so it programs nothing: GetNetwork
	// says so, and UpdateNetwork is refused (never a policy it cannot
	// enforce); a policy that does not parse is refused first.
	t.Run("Network", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			m := c.curl(t, v, c.token, "NetworkService/GetNetwork", `{}`).single(t)
			st, _ := m["state"].(map[string]any)
			if st["enforcement"] != "EGRESS_ENFORCEMENT_NONE" {
				t.Fatalf("GetNetwork %v", m)
			}
			c.curl(t, v, c.token, "NetworkService/UpdateNetwork", `{"policy":{"denyOut":["0.0.0.0/0"]}}`).rpcError(t, "failed_precondition", "cannot program")
			c.curl(t, v, c.token, "NetworkService/UpdateNetwork", `{"policy":{"allowOut":["not a host!"]}}`).rpcError(t, "invalid_argument", "network policy")
			c.curl(t, v, "", "NetworkService/GetNetwork", `{}`).rpcError(t, "unauthenticated", "access token")
		})
	})

	t.Run("Configure", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			// A section that is not built answers UNSUPPORTED not_built;
			// an invalid gateway INVALID with a message naming the field,
			// never a value; an empty S3 mounts section APPLIED (nothing
			// mounted).
			m := c.curl(t, v, c.token, "ConfigureService/Configure", `{"requestId":"contract-`+v.protocol+fmt.Sprint(v.h2)+`","s3Mounts":{},"efsVolumes":{},"secretGateway":{"routes":[{"name":"Bad Name","upstream":"https://example.com","headers":[{"name":"x-api-key","secret":"sk-contract-canary"}],"rules":[{"method":"POST","path":"/v1/*"}]}]}}`).single(t)
			results, _ := m["results"].([]any)
			if len(results) != 3 {
				t.Fatalf("Configure %v", m)
			}
			gw, _ := results[0].(map[string]any)
			s3, _ := results[1].(map[string]any)
			efs, _ := results[2].(map[string]any)
			if gw["section"] != "CONFIG_SECTION_SECRET_GATEWAY" || gw["code"] != "SECTION_CODE_INVALID" || !strings.Contains(fmt.Sprint(gw["message"]), "name") ||
				s3["section"] != "CONFIG_SECTION_S3_MOUNTS" || s3["code"] != "SECTION_CODE_APPLIED" ||
				efs["section"] != "CONFIG_SECTION_EFS_VOLUMES" || efs["code"] != "SECTION_CODE_UNSUPPORTED" || efs["errorClass"] != "not_built" ||
				strings.Contains(fmt.Sprint(m), "sk-contract-canary") {
				t.Fatalf("Configure %v", m)
			}
			st := c.curl(t, v, c.token, "ConfigureService/ConfigureStatus", `{}`).single(t)
			if strings.Contains(fmt.Sprint(st), "sk-contract-canary") || st["configGeneration"] == nil {
				t.Fatalf("ConfigureStatus %v", st)
			}
		})
	})

	// RPCs of the contract whose feature is not built answer Unimplemented
	// with a message naming the feature (docs/features.md).
	for _, tc := range []struct{ name, method, body, feature string }{
		{"StartKillTree", "ProcessService/Start", `{"process":{"cmd":"true"},"killTree":true}`, "kill_tree"},
	} {
		t.Run("Unimplemented"+tc.name, func(t *testing.T) {
			each(t, func(t *testing.T, v curlVariant) {
				r := c.curl(t, v, c.token, tc.method, tc.body)
				r.rpcError(t, "unimplemented", tc.feature)
				if !strings.Contains(r.errMessage, "not built yet") {
					t.Fatalf("message %q", r.errMessage)
				}
			})
		})
	}
	// The token check comes first: an anonymous caller learns nothing.
	t.Run("ConfigureNoToken", func(t *testing.T) {
		each(t, func(t *testing.T, v curlVariant) {
			c.curl(t, v, "", "ConfigureService/ConfigureStatus", `{}`).rpcError(t, "unauthenticated", "access token")
		})
	})
}

const contractSandboxID = "microvm-contract"

// contractRayd is a running rayd with an installed token, and the buf that
// talks to it.
type contractRayd struct {
	api      string
	token    string
	buf      string
	schema   string
	bufCache string
}

// contractBuf finds the pinned buf: $RAYITO_BUF (which must exist), else
// <repo>/.tmp/bin/buf, else the test skips.
func contractBuf(t *testing.T, repo string) string {
	t.Helper()
	if p := os.Getenv("RAYITO_BUF"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			t.Fatalf("RAYITO_BUF=%s: not a file (%v)", p, err)
		}
		return p
	}
	p := filepath.Join(repo, ".tmp", "bin", "buf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no buf: set RAYITO_BUF or run `make tools`, which builds the pinned buf into %s", p)
	}
	return p
}

func startContractRayd(t *testing.T) *contractRayd {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(wd) // go test runs in the tests directory
	if _, err := os.Stat(filepath.Join(repo, "buf.yaml")); err != nil {
		t.Fatalf("repository root %s has no buf.yaml: %v", repo, err)
	}
	c := &contractRayd{buf: contractBuf(t, repo), schema: repo, bufCache: t.TempDir()}

	bin := filepath.Join(t.TempDir(), "rayd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/rayito-dev/rayito/rayd/cmd/rayd").CombinedOutput(); err != nil {
		t.Fatalf("go build rayd: %v\n%s", err, out)
	}
	c.api = contractFreeAddr(t)
	hooks := contractFreeAddr(t)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	cmd := exec.Command(bin, "--api-addr", c.api, "--hooks-addr", hooks, "--state-dir", t.TempDir(), "-ready-fd", "3")
	cmd.ExtraFiles = []*os.File{readyW}
	logs := &contractLog{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		readyW.Close()
		t.Fatal(err)
	}
	readyW.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("rayd's output:\n%s", logs.String())
		}
	})
	_ = readyR.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, err := io.ReadAll(readyR); err != nil || string(got) != "R" {
		t.Fatalf("ready fd gave %q, %v", got, err)
	}

	c.token, err = accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := accesstoken.Digest(c.token)
	if err != nil {
		t.Fatal(err)
	}
	// No user: as root that is uid 1000, otherwise rayd's own user.
	payload, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest, Metadata: map[string]string{"suite": "contract"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"microvmId": contractSandboxID, "runHookPayload": payload})
	resp, err := http.Post("http://"+hooks+"/aws/lambda-microvms/runtime/v1/run", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out["outcome"] != "installed" {
		t.Fatalf("/run: %d %v %v", resp.StatusCode, out, err)
	}
	return c
}

// curlVariant is how buf curl talks: the RPC protocol, and HTTP/2 (h2c)
// or HTTP/1.1.
type curlVariant struct {
	protocol string
	h2       bool
}

// curlResult is one buf curl run.
type curlResult struct {
	args       []string
	stdout     string
	stderr     string
	exit       int
	msgs       []map[string]any // the response messages on stdout
	errCode    string           // "code" of the error JSON on stderr
	errMessage string           // its "message"
}

// curl runs buf curl for method ("Service/Method" of rayito.rayd.v1) with
// body as JSON, sending token unless it is empty.
func (c *contractRayd) curl(t *testing.T, v curlVariant, token, method, body string) curlResult {
	t.Helper()
	args := []string{"curl", "--schema", c.schema, "--protocol", v.protocol, "--timeout", "60s"}
	if v.h2 {
		args = append(args, "--http2-prior-knowledge")
	}
	if token != "" {
		args = append(args, "-H", "x-access-token: "+token)
	}
	args = append(args, "-d", body, "http://"+c.api+"/rayito.rayd.v1."+method)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.buf, args...)
	cmd.Env = append(os.Environ(), "BUF_CACHE_DIR="+c.bufCache)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// The token is a secret even in a test log.
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = strings.ReplaceAll(a, c.token, "<token>")
	}
	r := curlResult{args: shown, stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		r.exit = exitErr.ExitCode()
	default:
		t.Fatalf("buf %s: %v\nstderr: %s", strings.Join(shown, " "), err, r.stderr)
	}
	// Responses are JSON documents one after another (pretty-printed).
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for {
		m := map[string]any{}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("buf %s: stdout is not JSON messages: %v\n%s", strings.Join(shown, " "), err, r.stdout)
		}
		r.msgs = append(r.msgs, m)
	}
	// An RPC error exits with its gRPC code << 3 and prints
	// {"code": ..., "message": ...} on stderr; a usage or other failure
	// exits below 8 with text.
	if r.exit >= 8 {
		i := strings.IndexByte(r.stderr, '{')
		var e struct{ Code, Message string }
		if i < 0 || json.NewDecoder(strings.NewReader(r.stderr[i:])).Decode(&e) != nil || e.Code == "" {
			t.Fatalf("buf %s: exit %d without an error JSON on stderr:\n%s", strings.Join(shown, " "), r.exit, r.stderr)
		}
		r.errCode, r.errMessage = e.Code, e.Message
	}
	return r
}

func (r curlResult) ok(t *testing.T) {
	t.Helper()
	if r.exit != 0 {
		t.Fatalf("buf %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.exit, r.stdout, r.stderr)
	}
}

// single returns the one response message of a successful unary call.
func (r curlResult) single(t *testing.T) map[string]any {
	t.Helper()
	r.ok(t)
	if len(r.msgs) != 1 {
		t.Fatalf("buf %s: %d messages, want 1:\n%s", strings.Join(r.args, " "), len(r.msgs), r.stdout)
	}
	return r.msgs[0]
}

// rpcError checks that the call failed with code, in the error JSON and in
// the exit status, and that the message contains want.
func (r curlResult) rpcError(t *testing.T, code, want string) {
	t.Helper()
	n, known := contractCodes[code]
	if !known {
		t.Fatalf("unknown code %q", code)
	}
	if r.errCode != code || r.exit != n<<3 {
		t.Fatalf("buf %s: exit %d, code %q; want exit %d, code %q\nstdout: %s\nstderr: %s",
			strings.Join(r.args, " "), r.exit, r.errCode, n<<3, code, r.stdout, r.stderr)
	}
	if r.errMessage == "" || !strings.Contains(r.errMessage, want) {
		t.Fatalf("%s message %q, want one containing %q", code, r.errMessage, want)
	}
}

// contractCodes are the gRPC status codes by their Connect names.
var contractCodes = map[string]int{
	"canceled": 1, "unknown": 2, "invalid_argument": 3, "deadline_exceeded": 4,
	"not_found": 5, "already_exists": 6, "permission_denied": 7, "resource_exhausted": 8,
	"failed_precondition": 9, "aborted": 10, "out_of_range": 11, "unimplemented": 12,
	"internal": 13, "unavailable": 14, "data_loss": 15, "unauthenticated": 16,
}

// contractDir makes a directory that any uid can list, with a file
// hello.txt ("hello\n", 0644) and an empty directory sub, and returns its
// canonical path.
func contractDir(t *testing.T) string {
	t.Helper()
	// Not t.TempDir: its parent is 0700, so uid 1000 could not reach it.
	// As root, every ancestor must be searchable by others, too.
	base := ""
	for _, b := range []string{os.TempDir(), "/tmp"} {
		if os.Geteuid() != 0 || contractSearchable(b) {
			base = b
			break
		}
	}
	if base == "" {
		t.Skipf("neither %s nor /tmp is searchable by uid 1000, which rayd acts as when run as root", os.TempDir())
	}
	dir, err := os.MkdirTemp(base, "rayito-contract-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		t.Fatal(err)
	}
	file, sub := filepath.Join(dir, "hello.txt"), filepath.Join(dir, "sub")
	if err := os.WriteFile(file, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// Explicit modes: the umask must not decide what the test expects.
	for p, mode := range map[string]os.FileMode{dir: 0o755, sub: 0o755, file: 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// contractSearchable tells whether others may search p and each of its
// ancestors.
func contractSearchable(p string) bool {
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for ; ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

func contractFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// contractB64 decodes a protobuf JSON bytes field (standard base64, absent
// when empty).
func contractB64(t *testing.T, v any) string {
	t.Helper()
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("bytes field %#v is not a JSON string", v)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("bytes field %q: %v", s, err)
	}
	return string(b)
}

// jsonPath walks nested JSON objects; nil when a key is missing.
func contractPath(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func contractContains(list []any, want string) bool {
	for _, x := range list {
		if x == want {
			return true
		}
	}
	return false
}

// contractLog collects rayd's output; safe to read while rayd writes.
type contractLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *contractLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *contractLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
