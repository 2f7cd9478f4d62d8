package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack/cfntest"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	evstack "github.com/rayito-dev/rayito/events/stack"
)

const (
	testBucket   = "rayito-artifacts"
	testLogGroup = "/rayito/rayito-base"
	testRegion   = "us-east-1"
	testAccount  = "123456789012"
)

// cfnRequest is one request the CloudFormation fake got: its form (the
// query protocol's Action, Version and parameters) and whether it was
// signed.
type cfnRequest struct {
	Form   url.Values
	Signed bool
}

func (r cfnRequest) action() string { return r.Form.Get("Action") }

// fakeStack is a stack of the fake: its status moves along script, one
// step per DescribeStacks, after each operation.
type fakeStack struct {
	name, id, description string
	status                string
	script                []string // the statuses still to come
	outputs               map[string]string
	events                []fakeEvent // oldest first
}

type fakeEvent struct {
	logicalID, status, reason, token string
}

// cfnFake is the CloudFormation control plane at the wire: it answers
// the query protocol (form POST, XML) for the calls the CLI makes, from a
// scripted state, and records every request.
type cfnFake struct {
	t  *testing.T
	mu sync.Mutex

	reqs   []cfnRequest
	stacks map[string]*fakeStack // by name
	// Scripts of the next operations: the statuses a create, update or
	// delete goes through, and the events it leaves (the request's token
	// is filled in).
	createScript, updateScript, deleteScript []string
	createEvents, updateEvents, deleteEvents []fakeEvent
	noUpdates                                bool // UpdateStack answers "No updates are to be performed."
	n                                        int
}

// with changes the fake's state under its lock: a request of an
// earlier run (one the CLI gave up waiting for) may still be served.
func (c *cfnFake) with(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

func (c *cfnFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, err := url.ParseQuery(string(body))
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, cfnRequest{Form: form, Signed: strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")})
	action := form.Get("Action")
	name := form.Get("StackName")
	st := c.find(name)
	switch action {
	case "DescribeStacks":
		if st == nil || st.status == "DELETE_COMPLETE" && !strings.HasPrefix(name, "arn:") {
			c.validation(w, "Stack with id "+name+" does not exist")
			return
		}
		if len(st.script) > 0 {
			st.status, st.script = st.script[0], st.script[1:]
		}
		cfntest.Reply(w, action, "<Stacks><member>"+st.xml()+"</member></Stacks>")
	case "CreateStack":
		if st != nil && st.status != "DELETE_COMPLETE" {
			cfntest.Error(w, "AlreadyExistsException", "Stack ["+name+"] already exists")
			return
		}
		c.n++
		st = &fakeStack{name: name, id: fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/%d", testRegion, testAccount, name, c.n),
			description: evstack.DescriptionPrefix + " (fake)", status: "CREATE_IN_PROGRESS", script: c.createScript,
			outputs: map[string]string{
				evstack.OutputEventsTableName:   name + "-EventsTable-ABC",
				evstack.OutputStackKeySecretArn: "arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/events/" + name + "/stack-key-xyz",
			}}
		c.stacks[name] = st
		st.record(c.createEvents, form.Get("ClientRequestToken"))
		cfntest.Reply(w, action, "<StackId>"+st.id+"</StackId>")
	case "UpdateStack":
		if st == nil {
			c.validation(w, "Stack ["+name+"] does not exist")
			return
		}
		if c.noUpdates {
			c.validation(w, "No updates are to be performed.")
			return
		}
		st.status, st.script = "UPDATE_IN_PROGRESS", c.updateScript
		st.record(c.updateEvents, form.Get("ClientRequestToken"))
		cfntest.Reply(w, action, "<StackId>"+st.id+"</StackId>")
	case "DeleteStack":
		if st != nil {
			st.status, st.script = "DELETE_IN_PROGRESS", c.deleteScript
			st.record(c.deleteEvents, form.Get("ClientRequestToken"))
		}
		cfntest.Reply(w, action, "")
	case "DescribeStackEvents":
		if st == nil {
			c.validation(w, "Stack ["+name+"] does not exist")
			return
		}
		var b strings.Builder
		b.WriteString("<StackEvents>")
		for i := len(st.events) - 1; i >= 0; i-- { // newest first
			ev := st.events[i]
			fmt.Fprintf(&b, "<member><StackId>%s</StackId><StackName>%s</StackName><EventId>e%d</EventId><LogicalResourceId>%s</LogicalResourceId>"+
				"<ResourceStatus>%s</ResourceStatus><ResourceStatusReason>%s</ResourceStatusReason><ClientRequestToken>%s</ClientRequestToken>"+
				"<Timestamp>2026-01-01T00:00:%02dZ</Timestamp></member>",
				cfntest.Esc(st.id), cfntest.Esc(st.name), i, cfntest.Esc(ev.logicalID), cfntest.Esc(ev.status), cfntest.Esc(ev.reason), cfntest.Esc(ev.token), i%60)
		}
		b.WriteString("</StackEvents>")
		cfntest.Reply(w, action, b.String())
	default:
		cfntest.Error(w, "InvalidAction", "unknown action")
	}
}

func (c *cfnFake) find(name string) *fakeStack {
	if st, ok := c.stacks[name]; ok {
		return st
	}
	for _, st := range c.stacks {
		if st.id == name {
			return st
		}
	}
	return nil
}

func (st *fakeStack) record(evs []fakeEvent, token string) {
	for _, ev := range evs {
		ev.token = token
		if ev.logicalID == "" {
			ev.logicalID = st.name
		}
		st.events = append(st.events, ev)
	}
}

func (st *fakeStack) xml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "<StackId>%s</StackId><StackName>%s</StackName><Description>%s</Description><StackStatus>%s</StackStatus>"+
		"<CreationTime>2026-01-01T00:00:00Z</CreationTime><Outputs>", cfntest.Esc(st.id), cfntest.Esc(st.name), cfntest.Esc(st.description), cfntest.Esc(st.status))
	for _, k := range evstack.Outputs {
		if v, ok := st.outputs[k]; ok {
			fmt.Fprintf(&b, "<member><OutputKey>%s</OutputKey><OutputValue>%s</OutputValue></member>", cfntest.Esc(k), cfntest.Esc(v))
		}
	}
	b.WriteString("</Outputs>")
	return b.String()
}

func (c *cfnFake) validation(w http.ResponseWriter, msg string) {
	cfntest.Error(w, "ValidationError", msg)
}

// requests returns the requests of action (all for "").
func (c *cfnFake) requests(action string) []cfnRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cfnRequest
	for _, r := range c.reqs {
		if action == "" || r.action() == action {
			out = append(out, r)
		}
	}
	return out
}

// actions lists the actions so far, in order.
func (c *cfnFake) actions() []string {
	var out []string
	for _, r := range c.requests("") {
		out = append(out, r.action())
	}
	return out
}

// world is one test's AWS: the CloudFormation fake and an in-process S3
// (gofakes3), reached through the AWS SDK's environment, and a dist
// directory with the three Lambdas.
type world struct {
	t    *testing.T
	cfn  *cfnFake
	s3   *s3mem.Backend
	dist string

	mu    sync.Mutex
	s3Req []string
	s3Put []http.Header
	// headForbidden answers every HEAD with 403, as S3 does for a missing
	// key to a principal without s3:ListBucket.
	headForbidden bool
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, cfn: &cfnFake{t: t, stacks: map[string]*fakeStack{}}, s3: s3mem.New()}
	w.cfn.createScript = []string{"CREATE_IN_PROGRESS", "CREATE_COMPLETE"}
	w.cfn.updateScript = []string{"UPDATE_IN_PROGRESS", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_COMPLETE"}
	w.cfn.deleteScript = []string{"DELETE_IN_PROGRESS", "DELETE_COMPLETE"}
	cfnSrv := httptest.NewServer(w.cfn)
	t.Cleanup(cfnSrv.Close)
	if err := w.s3.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(w.s3, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	s3Srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
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
	t.Cleanup(s3Srv.Close)
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME":                            home,
		"AWS_CONFIG_FILE":                 filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":     filepath.Join(home, "credentials"),
		"AWS_PROFILE":                     "",
		"AWS_ACCESS_KEY_ID":               "AKIDEXAMPLE",
		"AWS_SECRET_ACCESS_KEY":           "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN":               "",
		"AWS_REGION":                      testRegion,
		"AWS_DEFAULT_REGION":              "",
		"AWS_ENDPOINT_URL":                cfnSrv.URL,
		"AWS_ENDPOINT_URL_CLOUDFORMATION": cfnSrv.URL,
		"AWS_ENDPOINT_URL_LAMBDA":         "",
		"AWS_ENDPOINT_URL_S3":             s3Srv.URL,
		"AWS_EC2_METADATA_DISABLED":       "true",
		"AWS_MAX_ATTEMPTS":                "1",
	} {
		t.Setenv(k, v)
		if v == "" {
			os.Unsetenv(k)
		}
	}
	old1, old2 := cfnstack.PollFirst, cfnstack.PollMax
	cfnstack.PollFirst, cfnstack.PollMax = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { cfnstack.PollFirst, cfnstack.PollMax = old1, old2 })

	w.dist = filepath.Join(t.TempDir(), "dist")
	for _, fn := range evstack.Functions {
		writeFile(t, filepath.Join(w.dist, "rayito-events-"+fn+"-0.1.0-linux-arm64"), elfARM64(fn), 0o755)
		// What else make dist writes beside them.
		writeFile(t, filepath.Join(w.dist, "rayito-events-"+fn+"-0.1.0-linux-amd64"), elfAMD64(), 0o755)
		writeFile(t, filepath.Join(w.dist, "rayito-events-"+fn+"-0.1.0-linux-arm64.cdx.json"), []byte("{}"), 0o644)
	}
	writeFile(t, filepath.Join(w.dist, "SHA256SUMS"), []byte("x\n"), 0o644)
	return w
}

func writeFile(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
}

// elfHeader is a minimal little-endian ELF64 executable header of
// machine, followed by payload.
func elfHeader(machine uint16, payload string) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1                     // ELFCLASS64, little-endian, version 1
	binary.LittleEndian.PutUint16(h[16:], 2)       // ET_EXEC
	binary.LittleEndian.PutUint16(h[18:], machine) // e_machine
	binary.LittleEndian.PutUint32(h[20:], 1)       // e_version
	binary.LittleEndian.PutUint16(h[52:], 64)      // e_ehsize
	binary.LittleEndian.PutUint16(h[54:], 56)      // e_phentsize
	binary.LittleEndian.PutUint16(h[58:], 64)      // e_shentsize
	return append(h, strings.Repeat(payload, 1000)...)
}

func elfARM64(fn string) []byte { return elfHeader(183, "the "+fn+" lambda ") }
func elfAMD64() []byte          { return elfHeader(62, "amd64 ") }

// result is one run of the CLI.
type result struct {
	out, err string
	code     int
}

// run runs `rayito stack ARGS...` in process with stdin in.
func runIn(t *testing.T, in string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(in), Out: &out, Err: &errb}, Env: func(string) string { return "" }}
	root := &cli.Command{
		Name: "rayito", Writer: &out, ErrWriter: &errb,
		Commands:       []*cli.Command{Command(f)},
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.Run(ctx, append([]string{"rayito", "stack"}, args...))
	msg, code := cliutil.Exit(err)
	if msg != "" {
		errb.WriteString("rayito: " + msg + "\n")
	}
	return result{out.String(), errb.String(), code}
}

func (w *world) run(args ...string) result {
	w.t.Helper()
	return runIn(w.t, "", args...)
}

// deployArgs are deploy's required flags and the world's dist.
func (w *world) deployArgs(extra ...string) []string {
	return append([]string{"deploy", "events", "--bucket", testBucket, "--log-group", testLogGroup, "--artifacts", w.dist}, extra...)
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
