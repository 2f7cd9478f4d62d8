//go:build linux

package launcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// recorder is a services handler that records who asked what.
type recorder struct {
	mu    sync.Mutex
	hosts []string
}

func (r *recorder) handler(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hosts = append(r.hosts, id+" "+req.Host)
		r.mu.Unlock()
		http.NotFound(w, req) // no credentials: rayd's checkpoint fails after asking
	})
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.hosts...)
}

// checkpoint asks rayd for a checkpoint (Connect JSON stream over
// HTTP/1.1) and returns the body: it fails (no credentials), after rayd
// asked the platform's metadata service.
func checkpoint(t *testing.T, apiAddr, token string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"location": map[string]any{"bucket": "bucket", "keyPrefix": "p"}})
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.Write(body)
	hr, _ := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/rayito.rayd.v1.FilesystemService/Checkpoint", &env)
	hr.Header.Set("Content-Type", "application/connect+json")
	hr.Header.Set("x-access-token", token)
	resp, err := httpClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServicesOnlyForRayd: a sandbox's rayd reaches the platform's
// services through the directory descriptor it was given (isolated and
// unisolated sandboxes), the socket sits in a 0711 directory of the
// sandbox's Dir, and anyone else connecting is refused.
func TestServicesOnlyForRayd(t *testing.T) {
	modes := map[string]func(t *testing.T, rec *recorder) *Launcher{
		"isolated": func(t *testing.T, rec *recorder) *Launcher {
			if os.Geteuid() != 0 {
				t.Skip("needs root: namespaces")
			}
			l := newLauncher(t, "", func(o *Options) { o.Services = rec.handler })
			if !l.Privileged() || l.cgErr != nil {
				t.Skip("needs root with namespaces and cgroups")
			}
			return l
		},
		"unisolated": func(t *testing.T, rec *recorder) *Launcher {
			l := unprivileged(t, "", nil)
			l.opts.Services = rec.handler
			return l
		},
	}
	for name, mk := range modes {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			l := mk(t, rec)
			spec := newSpec(t, l)
			if name == "unisolated" {
				spec = unprivSpec(t, l)
			}
			servicesCheck(t, l, spec, rec)
		})
	}
}

// TestAsUserServicesRootless is TestServicesOnlyForRayd for a rootless
// sandbox, as an ordinary user (under TestRootless): rayd and the
// sandbox's code share a uid there, and only the peer check keeps the
// code out.
func TestAsUserServicesRootless(t *testing.T) {
	asUser(t)
	rec := &recorder{}
	l := rootlessLauncher(t, func(o *Options) { o.Services = rec.handler })
	servicesCheck(t, l, newSpec(t, l), rec)
}

// servicesCheck launches spec and checks how its rayd and a stranger
// reach the services.
func servicesCheck(t *testing.T, l *Launcher, spec Spec, rec *recorder) {
	t.Helper()
	inst := launch(t, l, spec)
	token := install(t, inst)
	out := checkpoint(t, inst.APIAddr(), token)
	if !bytes.Contains([]byte(out), []byte("no_credentials")) && !bytes.Contains([]byte(out), []byte("NO_CREDENTIALS")) {
		t.Errorf("checkpoint answer: %s", out)
	}
	seen := rec.seen()
	if len(seen) == 0 || seen[0] != spec.ID+" "+localplatform.IMDSHost {
		t.Errorf("the services saw %v, want rayd asking %s", seen, localplatform.IMDSHost)
	}
	sd := filepath.Join(spec.Dir, servicesDirName)
	if st, err := os.Stat(sd); err != nil || st.Mode().Perm() != 0o711 {
		t.Errorf("services dir: %v %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(sd, localplatform.ServicesSocket)); err != nil || st.Mode().Perm() != 0o666 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("services socket: %v %v", st, err)
	}
	// This process is not the sandbox's rayd (it connects through
	// a descriptor of the directory, as rayd does: the path is
	// longer than a socket address may be).
	dir, err := os.Open(sd)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	sock := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + localplatform.ServicesSocket
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + localplatform.IMDSHost + "/latest/meta-data/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a stranger got %d, want 403", resp.StatusCode)
	}
	if n := len(rec.seen()); n != len(seen) {
		t.Errorf("the stranger's request reached the services")
	}
}
