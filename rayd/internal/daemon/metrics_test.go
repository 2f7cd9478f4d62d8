package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/user"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a
// moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Metrics counts every process of the sandbox, not the processes rayd
// supervises: a command that leaves two background sleeps behind and
// exits leaves process_count 2 (the sleeps, adopted by rayd) and
// task_count 3 (with rayd), where it showed 0 before. rayd runs as a
// process of its own (the test binary in listenChild mode), so its scan
// sees its own processes only, not those of the package's other tests.
func TestMetricsCountsEveryProcess(t *testing.T) {
	t.Parallel()
	api, hooks := freeLoopbackAddr(t), freeLoopbackAddr(t)
	startListenChild(t, false, "-api-addr", api, "-hooks-addr", hooks, "-e2b=false")

	token, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := accesstoken.Digest(token)
	if err != nil {
		t.Fatal(err)
	}
	p := &runpayload.Payload{V: 1, TokenSHA256: digest}
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		p.User = u.Username // without root rayd runs processes as itself
	}
	raw, err := runpayload.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"microvmId": "microvm-metrics", "runHookPayload": raw})
	resp, err := http.Post("http://"+hooks+"/aws/lambda-microvms/runtime/v1/run", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if out["outcome"] != "installed" {
		t.Fatalf("/run: %v", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	procs := raydv1connect.NewProcessServiceClient(raydtest.H2CClient(), "http://"+api, raydtest.WithToken(token))
	health := raydv1connect.NewHealthServiceClient(raydtest.H2CClient(), "http://"+api, raydtest.WithToken(token))
	counts := func() (uint32, uint32) {
		t.Helper()
		m, err := health.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return m.Msg.GetProcessCount(), m.Msg.GetTaskCount()
	}
	if p, n := counts(); p != 0 || n != 1 {
		t.Fatalf("an idle sandbox: process_count %d, task_count %d; want 0 and 1 (rayd)", p, n)
	}

	// The command ends at once; its sleeps live on, orphans of rayd.
	s, err := procs.Start(ctx, connect.NewRequest(raydtest.Shell("sleep 100 & sleep 100 & exit 0")))
	if err != nil {
		t.Fatal(err)
	}
	if r := raydtest.Collect(t, s); r.End.GetExitCode() != 0 {
		t.Fatalf("end %v", r.End)
	}
	if p, n := counts(); p != 2 || n != 3 {
		t.Fatalf("two background sleeps: process_count %d, task_count %d; want 2 and 3", p, n)
	}

	// A running command and its child count too.
	s, err = procs.Start(ctx, connect.NewRequest(raydtest.Shell("sleep 100; true")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", s.Err())
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, n := counts()
		if p == 4 && n == 5 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("a running sh and its sleep besides the two: process_count %d, task_count %d; want 4 and 5", p, n)
		}
	}
}
