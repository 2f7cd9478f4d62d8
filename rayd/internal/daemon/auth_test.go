package daemon

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func TestHealthIsAnonymousAndReportsBoot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	before := h.Health()
	if before.GetAgentReady() || before.GetSandboxId() != "" {
		t.Fatalf("before /run: %v", before)
	}
	h.Run(nil)
	after := h.Health()
	if !after.GetAgentReady() || after.GetSandboxId() != "microvm-test" || after.GetMetadata()["team"] != "a" {
		t.Fatalf("after /run: %v", after)
	}
	if after.GetAgentVersion() == "" || after.GetCpuCount() == 0 || after.GetMemoryTotalBytes() == 0 {
		t.Fatalf("facts missing: %v", after)
	}
}

func TestAuthGate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	noToken := raydv1connect.NewProcessServiceClient(h.Client, h.APIURL)
	start := func(c raydv1connect.ProcessServiceClient) error {
		s, err := c.Start(ctx, connect.NewRequest(raydtest.Shell("echo hi")))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}
	list := func(c raydv1connect.ProcessServiceClient) error {
		_, err := c.List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
		return err
	}

	// Before /run even the right token is refused.
	if got := raydtest.CodeOf(start(h.Processes())); got != connect.CodeUnauthenticated {
		t.Fatalf("token before /run: %v", got)
	}
	h.Run(nil)
	other, _ := raydtest.NewToken(t)
	wrong := raydv1connect.NewProcessServiceClient(h.Client, h.APIURL, raydtest.WithToken(other))
	garbage := raydv1connect.NewProcessServiceClient(h.Client, h.APIURL, raydtest.WithToken("not base64url!"))
	for name, c := range map[string]raydv1connect.ProcessServiceClient{"none": noToken, "wrong": wrong, "garbage": garbage} {
		if got := raydtest.CodeOf(start(c)); got != connect.CodeUnauthenticated {
			t.Errorf("%s token, stream: %v", name, got)
		}
		if got := raydtest.CodeOf(list(c)); got != connect.CodeUnauthenticated {
			t.Errorf("%s token, unary: %v", name, got)
		}
	}
	if err := start(h.Processes()); err != nil {
		t.Fatalf("right token: %v", err)
	}
	if err := list(h.Processes()); err != nil {
		t.Fatalf("right token, unary: %v", err)
	}

	// A client stream (FilesystemService.Write) is gated too.
	fsNoToken := raydv1connect.NewFilesystemServiceClient(h.Client, h.APIURL)
	w := fsNoToken.Write(ctx)
	_ = w.Send(&raydv1.WriteRequest{Chunk: []byte("x")})
	if _, err := w.CloseAndReceive(); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("client stream without token: %v", err)
	}
	fs := raydv1connect.NewFilesystemServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
	if _, err := fs.GetTransfer(ctx, connect.NewRequest(&raydv1.GetTransferRequest{TransferId: "x"})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("RPC with token reaches its handler (an unknown transfer): %v", err)
	}
	metrics := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL)
	if _, err := metrics.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Metrics without token: %v", err)
	}
}

func TestInvalidPayloadLeavesRaydTokenless(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	out := h.Hook("run", map[string]string{"microvmId": "microvm-x", "runHookPayload": `{"v":2}`})
	if out["outcome"] != "tokenless" {
		t.Fatalf("outcome %v", out["outcome"])
	}
	// The boot /run is spent: a valid one now is already_ran.
	digestPayload := func() string {
		_, d := raydtest.NewToken(t)
		return `{"token_sha256":"` + d + `","v":1}`
	}()
	if out := h.Hook("run", map[string]string{"microvmId": "microvm-x", "runHookPayload": digestPayload}); out["outcome"] != "already_ran" {
		t.Fatalf("second /run: %v", out["outcome"])
	}
	if _, err := h.Processes().List(context.Background(), connect.NewRequest(&raydv1.ListRequest{})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("tokenless List: %v", err)
	}
	if hr := h.Health(); hr.GetAgentReady() || hr.GetHookAnomalies() == 0 {
		t.Fatalf("health: %v", hr)
	}
}

func TestSecondRunIsAnAnomaly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(nil)
	if n := h.Health().GetHookAnomalies(); n != 0 {
		t.Fatalf("anomalies after first /run: %d", n)
	}
	_, d := raydtest.NewToken(t)
	out := h.Hook("run", map[string]string{"microvmId": "microvm-evil", "runHookPayload": `{"token_sha256":"` + d + `","v":1}`})
	if out["outcome"] != "already_ran" {
		t.Fatalf("outcome %v", out["outcome"])
	}
	hr := h.Health()
	if hr.GetHookAnomalies() != 1 || hr.GetSandboxId() != "microvm-test" {
		t.Fatalf("health after second /run: %v", hr)
	}
	// The original token still works.
	if _, err := h.Processes().List(context.Background(), connect.NewRequest(&raydv1.ListRequest{})); err != nil {
		t.Fatal(err)
	}
}
