package templates

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/runpayload"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// Launcher starts build sandboxes.
type Launcher interface {
	Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error)
}

// SandboxBuilder builds layers in sandboxes of the local platform: one per
// build, with Internet access and root allowed, whose /usr writes go to
// the layer (launcher.TemplateLayer.Build). The steps run through that
// sandbox's rayd, like a client's commands: run steps with /bin/sh -c,
// copy steps as root from the context bound at launcher.BuildContextPath.
type SandboxBuilder struct {
	Launcher Launcher
	// Dial reaches the sandbox's rayd (nil: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// hookPrefix is rayd's hooks path (registry.HookPathPrefix).
const hookPrefix = "/aws/lambda-microvms/runtime/v1/"

// copyScript copies $SRC (a file or a directory's contents) to $DST, owned
// by $OWNER: staged in /tmp and owned there first, so that only what is
// copied changes hands, never what $DST already holds.
const copyScript = `set -eu
stage=$(mktemp -d /tmp/rayito-copy.XXXXXX)
trap 'rm -rf "$stage"' EXIT
if [ -d "$SRC" ]; then
  cp -R -P --preserve=mode,timestamps "$SRC"/. "$stage"/
  chmod 0755 "$stage"
  chown -R -h "$OWNER:$OWNER" "$stage"
  if [ -e "$DST" ] || [ -L "$DST" ]; then
    cp -R -P -p "$stage"/. "$DST"/
  else
    mkdir -p "$(dirname "$DST")"
    cp -R -P -p "$stage" "$DST"
  fi
else
  cp -P --preserve=mode,timestamps "$SRC" "$stage/f"
  chown -h "$OWNER:$OWNER" "$stage/f"
  mkdir -p "$(dirname "$DST")"
  cp -P -p "$stage/f" "$DST"
fi
`

// workdirScript makes $DIR, the current user's when under /home/user.
const workdirScript = `set -eu
mkdir -p "$DIR"
case "$DIR" in /home/user|/home/user/*) if [ "$AS" = user ]; then chown user:user "$DIR"; fi;; esac
`

// Build implements Builder.
func (b *SandboxBuilder) Build(ctx context.Context, layer string, spec *ptemplate.Spec, log io.Writer) error {
	tdir := filepath.Dir(filepath.Dir(layer))
	dir := filepath.Join(tdir, "builds", filepath.Base(layer))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the build directory could not be made"}
	}
	defer os.RemoveAll(dir)
	// What the build writes goes to a bounded tmpfs (charged to the build
	// sandbox's memory too), copied to the layer on disk once it is done:
	// a build cannot fill the host's disk.
	scratch, err := mountScratch(layer)
	if err != nil {
		fmt.Fprintf(log, "the build's scratch space could not be made\n")
		return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the build's scratch space could not be made"}
	}
	defer unmountScratch(scratch)
	u, _ := uuid.NewRandom()
	id := "microvm-" + u.String()
	inst, err := b.Launcher.Launch(ctx, launcher.Spec{
		ID: id, Dir: dir, LogPath: filepath.Join(dir, "rayd.log"), Internet: true,
		MemoryBytes: buildMemory,
		Env:         []string{"RAYITO_ALLOW_ROOT=1"},
		Template:    &launcher.TemplateLayer{Dir: scratch, Build: true},
	})
	if err != nil {
		fmt.Fprintf(log, "the build sandbox did not start\n")
		return &BuildError{Reason: localplatform.TemplateReasonLaunchFailed, Step: -1, Message: "the build sandbox did not start"}
	}
	var once sync.Once
	stopped := false
	stop := func() bool {
		once.Do(func() {
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
			defer cancel()
			_ = inst.Terminate(tctx)
			select {
			case <-inst.Done():
				stopped = true
			case <-tctx.Done():
			}
		})
		return stopped
	}
	defer stop()
	dial := b.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableCompression: true}}
	token, err := accesstoken.New()
	if err != nil {
		return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "no token"}
	}
	if err := postRun(ctx, hc, inst, id, token); err != nil {
		fmt.Fprintf(log, "the build sandbox did not take its configuration\n")
		return &BuildError{Reason: localplatform.TemplateReasonLaunchFailed, Step: -1, Message: "the build sandbox did not start"}
	}
	procs := raydv1connect.NewProcessServiceClient(hc, "http://"+inst.APIAddr(), connect.WithInterceptors(tokenHeader(token)))
	if err := runSteps(ctx, procs, log, spec); err != nil {
		return err
	}
	fmt.Fprintf(log, "done: %d steps\n", len(spec.Steps))
	// The sandbox ends before its layer is read.
	if !stop() {
		return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the build sandbox did not end"}
	}
	if err := copyLayer(scratch, layer); err != nil {
		fmt.Fprintf(log, "the layer could not be saved\n")
		return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the layer could not be saved"}
	}
	return saveBase(layer, log)
}

// runSteps runs spec's steps in the build sandbox through procs, in
// order, each logged; the first that fails is a *BuildError naming it.
func runSteps(ctx context.Context, procs raydv1connect.ProcessServiceClient, log io.Writer, spec *ptemplate.Spec) error {
	user, cwd, envs := ptemplate.UserRoot, "/", map[string]string{}
	for i, st := range spec.Steps {
		switch {
		case st.Run != "":
			fmt.Fprintf(log, "#%d run (as %s)\n", i, user)
			code, err := exec(ctx, procs, log, user, cwd, envs, "/bin/sh", "-c", st.Run)
			if err != nil || code != 0 {
				return stepErr(ctx, localplatform.TemplateReasonRunStepFailed, i, code, err)
			}
		case st.Copy != nil:
			owner := st.Copy.Owner
			if owner == "" {
				owner = ptemplate.UserRoot
			}
			fmt.Fprintf(log, "#%d copy (owned by %s)\n", i, owner)
			src := launcher.BuildContextPath
			if st.Copy.Src != "." {
				src += "/" + st.Copy.Src
			}
			code, err := exec(ctx, procs, log, ptemplate.UserRoot, "/", map[string]string{"SRC": src, "DST": st.Copy.Dst, "OWNER": owner}, "/bin/sh", "-c", copyScript)
			if err != nil || code != 0 {
				return stepErr(ctx, localplatform.TemplateReasonCopyFailed, i, code, err)
			}
		case st.Env != nil:
			fmt.Fprintf(log, "#%d env (%d variables)\n", i, len(st.Env))
			maps.Copy(envs, st.Env)
		case st.Workdir != "":
			fmt.Fprintf(log, "#%d workdir\n", i)
			code, err := exec(ctx, procs, log, ptemplate.UserRoot, "/", map[string]string{"DIR": st.Workdir, "AS": user}, "/bin/sh", "-c", workdirScript)
			if err != nil || code != 0 {
				return stepErr(ctx, localplatform.TemplateReasonWorkdirFailed, i, code, err)
			}
			cwd = st.Workdir
		case st.User != "":
			fmt.Fprintf(log, "#%d user %s\n", i, st.User)
			user = st.User
		}
	}
	return nil
}

// saveBase keeps the host's /usr as it is at the end of the build under
// the layer (baseDir), or says in the log that the template runs on the
// live /usr when the state directory cannot link to it.
func saveBase(layer string, log io.Writer) error {
	base := filepath.Join(layer, baseDir)
	n, err := snapshotUsr("/usr", base)
	if err == nil {
		fmt.Fprintf(log, "base: the host's /usr as it is now (%d entries, linked)\n", n)
		return nil
	}
	_ = os.RemoveAll(base)
	if errors.Is(err, errBaseCrossDevice) {
		fmt.Fprintf(log, "base: the host's live /usr (the platform's state directory is on another file system)\n")
		return nil
	}
	fmt.Fprintf(log, "the base could not be saved\n")
	return &BuildError{Reason: localplatform.TemplateReasonInternal, Step: -1, Message: "the base could not be saved"}
}

func stepErr(ctx context.Context, reason string, step int, code int32, err error) error {
	if ctx.Err() != nil {
		return &BuildError{Reason: localplatform.TemplateReasonBuildTimeout, Step: step, Message: "the build ran out of time"}
	}
	if err != nil {
		return &BuildError{Reason: reason, Step: step, Message: fmt.Sprintf("step %d could not run", step)}
	}
	return &BuildError{Reason: reason, Step: step, Message: fmt.Sprintf("step %d exited with code %d", step, code)}
}

// exec runs one command in the build sandbox, its output to log, and
// returns its exit code.
func exec(ctx context.Context, procs raydv1connect.ProcessServiceClient, log io.Writer, user, cwd string, envs map[string]string, cmd string, args ...string) (int32, error) {
	req := &raydv1.StartRequest{
		Process: &raydv1.ProcessConfig{Cmd: cmd, Args: args, Envs: envs, Cwd: &cwd},
		User:    &raydv1.User{Username: user},
	}
	s, err := procs.Start(ctx, connect.NewRequest(req))
	if err != nil {
		return -1, err
	}
	defer s.Close()
	var end *raydv1.EndEvent
	for s.Receive() {
		switch e := s.Msg().Event.(type) {
		case *raydv1.ProcessEvent_Data:
			_, _ = log.Write(e.Data.GetStdout())
			_, _ = log.Write(e.Data.GetStderr())
		case *raydv1.ProcessEvent_End:
			end = e.End
		}
	}
	if err := s.Err(); err != nil {
		return -1, err
	}
	if end == nil {
		return -1, fmt.Errorf("no end")
	}
	if !end.GetExited() {
		return -1, nil
	}
	return end.GetExitCode(), nil
}

// postRun gives the build sandbox its token: POST /run, retried while rayd
// does not answer yet.
func postRun(ctx context.Context, hc *http.Client, inst launcher.Instance, id, token string) error {
	digest, _ := accesstoken.Digest(token)
	payload, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest, User: ptemplate.UserRoot})
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]string{"microvmId": id, "runHookPayload": payload})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+inst.HooksAddr()+hookPrefix+"run", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			return fmt.Errorf("run hook: HTTP %d", resp.StatusCode)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-inst.Done():
			return fmt.Errorf("rayd exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type tokenHeader string

func (t tokenHeader) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("x-access-token", string(t))
		return next(ctx, req)
	}
}

func (t tokenHeader) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("x-access-token", string(t))
		return conn
	}
}

func (t tokenHeader) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
