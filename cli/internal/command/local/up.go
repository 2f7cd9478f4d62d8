package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/proto/localplatform"
)

type statusOut struct {
	Endpoint string `json:"endpoint"`
	Running  bool   `json:"running"`
	Pid      int    `json:"pid,omitempty"`
	StateDir string `json:"state_dir"`
	Log      string `json:"log,omitempty"`
	// OtherUser: the platform at Endpoint is another user's (OwnerUID,
	// -1 when it did not say).
	OtherUser bool `json:"other_user,omitempty"`
	OwnerUID  int  `json:"owner_uid,omitempty"`
	// E2BEnv is what an E2B program exports to use the gateway started
	// with --e2b-addr (never a key).
	E2BEnv map[string]string `json:"e2b_env,omitempty"`
}

func upCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "up",
		Usage: "start the local platform in the background",
		Flags: []cli.Flag{stateDirFlag(), awsQuotasFlag(), prebootedFlag(), kernelStartFlag(), sandboxBinaryFlag(), eventsAllowLoopbackFlag(), eventsCAFlag(), unisolatedFlag(), e2bAddrFlag(), e2bDomainFlag(), e2bTLSFlag(), e2bTemplateFlag(), cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runUp(ctx, f, cmd)
		},
	}
}

// runUp starts rayito local serve in the background, with the start-time
// flags given, unless this user's platform already runs, and waits until
// it answers.
func runUp(ctx context.Context, f *cliutil.Factory, cmd *cli.Command) error {
	pool, err := prebooted(cmd)
	if err != nil {
		return err
	}
	addr, err := listenAddr(f)
	if err != nil {
		return err
	}
	e2bAddr := cmd.String(e2bAddrFlag().Name)
	// Checked here too, so that a bad address, a missing key or a
	// bad TLS directory fails now rather than in the background.
	gw, err := e2bGatewayFor(f, cmd)
	if err != nil {
		return err
	}
	ep := platform.Endpoint(f.Getenv)
	dir := stateDir(cmd)
	out := statusOut{Endpoint: ep, StateDir: dir, Log: filepath.Join(dir, "serve.log")}
	probe := platform.ProbeEndpoint(ctx, ep)
	if probe.Mine {
		// A running platform keeps the options it started with: a
		// start-time flag given now would be silently ignored.
		if set := startFlagsSet(cmd); len(set) > 0 {
			return fmt.Errorf("a local platform already runs at %s; %s applies only when it starts: stop it first (`rayito local down`)", ep, strings.Join(set, ", "))
		}
		out.Running, out.Pid = true, readPid(dir)
		return report(f.IO, cmd, out, "already running at "+ep)
	}
	note := ""
	if probe.OtherUser {
		// The address is another user's platform: this user's own
		// starts on a free port, recorded in its state dir (where
		// the CLI and the SDK look), unless RAYITO_ENDPOINT pins it.
		if f.Getenv("RAYITO_ENDPOINT") != "" {
			return fmt.Errorf("%s; set RAYITO_ENDPOINT to another address (or unset it)", probe.OtherUserText(ep))
		}
		addr = "127.0.0.1:0"
		note = probe.OtherUserText(ep) + "; "
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(out.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd)
	args, err := serveArgs(cmd, dir, addr, pool)
	if err != nil {
		return err
	}
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logf, logf
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return err
	}
	out.Pid = child.Process.Pid
	if err := os.WriteFile(pidFile(dir), []byte(strconv.Itoa(out.Pid)+"\n"), 0o600); err != nil {
		return err
	}
	if out.Endpoint, err = waitServing(ctx, child, dir, out.Log, logStart); err != nil {
		return err
	}
	_ = child.Process.Release()
	out.Running = true
	text := "local platform up at " + out.Endpoint
	if note != "" {
		text = note + "yours is up at " + out.Endpoint + " (recorded in " + filepath.Join(dir, localplatform.EndpointFile) + ", where rayito and the SDK find it)"
	}
	if gw != nil {
		text += e2bEnv(gw, e2bAddr, &out)
	}
	return report(f.IO, cmd, out, text)
}

// serveArgs are the arguments of the rayito local serve that up starts:
// the state dir, the address and the start-time flags given to up.
func serveArgs(cmd *cli.Command, dir, addr string, pool int) ([]string, error) {
	args := []string{"local", "serve", "--state-dir", dir, "--addr", addr}
	if cmd.Bool(awsQuotasFlag().Name) {
		args = append(args, "--aws-quotas")
	}
	if cmd.Bool(unisolatedFlag().Name) {
		args = append(args, "--unisolated")
	}
	if cmd.IsSet(prebootedFlag().Name) {
		args = append(args, "--prebooted", strconv.Itoa(pool))
	}
	if e2bAddr := cmd.String(e2bAddrFlag().Name); e2bAddr != "" {
		args = append(args, "--e2b-addr", e2bAddr)
	}
	if cmd.IsSet(e2bDomainFlag().Name) {
		args = append(args, "--e2b-domain", cmd.String(e2bDomainFlag().Name))
	}
	if cmd.Bool(e2bTLSFlag().Name) {
		args = append(args, "--e2b-tls")
	}
	for _, t := range cmd.StringSlice(e2bTemplateFlag().Name) {
		args = append(args, "--e2b-template", t)
	}
	if cmd.IsSet(kernelStartFlag().Name) {
		args = append(args, "--kernel-start", cmd.String(kernelStartFlag().Name))
	}
	if bin := cmd.String(sandboxBinaryFlag().Name); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return nil, cliutil.Usagef("--sandbox-binary: %v", err)
		}
		args = append(args, "--sandbox-binary", abs)
	}
	if cmd.Bool(eventsAllowLoopbackFlag().Name) {
		args = append(args, "--events-allow-loopback")
	}
	if ca := cmd.String(eventsCAFlag().Name); ca != "" {
		if _, err := eventsCA(cmd); err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(ca)
		if err != nil {
			return nil, err
		}
		args = append(args, "--events-ca", abs)
	}
	return args, nil
}

// waitServing waits until the platform child started in dir records the
// endpoint it serves and answers there (at most 30 s), and returns it;
// logPath is its log, named in the errors, which the child writes from
// offset logStart on: when it exits at start, the error is its last
// error line there.
func waitServing(ctx context.Context, child *exec.Cmd, dir, logPath string, logStart int64) (string, error) {
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	// The platform records the endpoint it serves once it listens.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rec, ok := localplatform.ReadEndpoint(dir); ok && platform.Answers(ctx, rec) {
			return rec, nil
		}
		select {
		case <-exited:
			_ = os.Remove(pidFile(dir))
			if why := startError(logPath, logStart); why != "" {
				return "", fmt.Errorf("the local platform exited at start: %s (log: %s)", why, logPath)
			}
			return "", fmt.Errorf("the local platform exited at start; see %s", logPath)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			return "", fmt.Errorf("the local platform did not answer within 30s; see %s", logPath)
		}
	}
}

// startError is the last error line ("rayito: ...") a platform that
// failed to start wrote to its log from offset on, without the prefix;
// "" when there is none. At most the last 16 KiB are read.
func startError(logPath string, offset int64) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	const maxTail = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size()-offset > maxTail {
		offset = st.Size() - maxTail
	}
	b, err := io.ReadAll(io.NewSectionReader(f, offset, maxTail))
	if err != nil {
		return ""
	}
	why := ""
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "rayito: "); ok && rest != "" {
			why = rest
		}
	}
	return why
}

// e2bEnv is up's line about the E2B gateway at addr: what an E2B program
// exports (never a key), also set in out.
func e2bEnv(gw *e2bGateway, addr string, out *statusOut) string {
	env := gw.exposure.Env(addr)
	out.E2BEnv = map[string]string{}
	var line []string
	for i := 0; i+1 < len(env); i += 2 {
		k, v := env[i].(string), env[i+1].(string)
		out.E2BEnv[k] = v
		line = append(line, k+"="+v)
	}
	return "\nE2B gateway: export " + strings.Join(line, " ") + " E2B_API_KEY=<a key of rayito e2b key create>"
}

// startFlagsSet names the flags of up given on the command line that
// only apply when a platform starts.
func startFlagsSet(cmd *cli.Command) []string {
	var set []string
	for _, name := range []string{e2bAddrFlag().Name, e2bDomainFlag().Name, e2bTLSFlag().Name, e2bTemplateFlag().Name, prebootedFlag().Name, kernelStartFlag().Name, sandboxBinaryFlag().Name, awsQuotasFlag().Name, unisolatedFlag().Name, eventsAllowLoopbackFlag().Name, eventsCAFlag().Name} {
		if cmd.IsSet(name) {
			set = append(set, "--"+name)
		}
	}
	return set
}

func report(io cliutil.IO, cmd *cli.Command, out statusOut, text string) error {
	if cmd.Bool("json") {
		return cliutil.PrintJSON(io.Out, out)
	}
	fmt.Fprintln(io.Out, text)
	return nil
}
