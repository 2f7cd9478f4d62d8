package agent_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
	"github.com/rayito-dev/rayito/cli/internal/app"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
	"github.com/rayito-dev/rayito/cli/internal/cfnstack/cfntest"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/command/agent"
)

const (
	acBucket  = "rayito-artifacts-test"
	acAccount = "111122223333"
	acRegion  = "us-east-1"
	acStack   = "rayito-agent-support-bot"
	acRuntime = "rayito_support_bot"
	acRepoURI = "111122223333.dkr.ecr.us-east-1.amazonaws.com/rayito-agent-support-bot"
	// acCanary is a secret value: it must reach no request and no output.
	acCanary = "canary-secret-value-7f3a"
)

// call is one request the fake AWS served: the service and the
// operation.
type call struct{ svc, op string }

func (c call) String() string { return c.svc + " " + c.op }

// fakeRuntime is an AgentCore runtime of the fake.
type fakeRuntime struct {
	name, id, arn, description string
	pending                    int    // Gets that answer the transitional status
	transit                    string // CREATING or UPDATING
	mmds                       bool
	gone                       bool
}

// fakeStack is a CloudFormation stack of the fake.
type fakeStack struct {
	id, status string
	script     []string
	events     [][3]string // logical id, status, reason (oldest first)
	token      string
}

// fakeAWS is every AWS service a deploy to AgentCore speaks, on one
// httptest server behind AWS_ENDPOINT_URL: CloudFormation (query/XML), S3
// (REST, gofakes3 behind it), CodeBuild and ECR (JSON 1.1), the AgentCore
// control plane (REST-JSON) and its data plane. Every request is recorded
// as (service, operation), with its body.
type fakeAWS struct {
	t  *testing.T
	mu sync.Mutex

	calls  []call
	bodies map[string][][]byte // operation → request bodies
	// wire is every request's headers and body, never forgotten.
	wire [][]byte
	// zips are the bodies of the PutObject requests.
	zips  [][]byte
	heads map[string][]http.Header

	runtimes []*fakeRuntime
	repo     bool
	repoTags string // JSON of the repository's tags
	images   map[string]string
	stack    *fakeStack
	// createScript is the stack's statuses after CreateStack (the first
	// is set by CreateStack itself); rollback adds a failed resource.
	createScript []string
	rollback     bool
	noUpdates    bool
	buildFail    bool
	buildPolls   int
	// onBuildPoll runs on each BatchGetBuilds (a test's Ctrl-C).
	onBuildPoll func()
	// stuck keeps every runtime CREATING.
	stuck   bool
	lastTag string

	s3  *s3mem.Backend
	s3h http.Handler
}

func newFakeAWS(t *testing.T) *fakeAWS {
	a := &fakeAWS{t: t, bodies: map[string][][]byte{}, heads: map[string][]http.Header{}, images: map[string]string{}, repoTags: `[]`,
		createScript: []string{"CREATE_IN_PROGRESS", "CREATE_COMPLETE"}, s3: s3mem.New()}
	if err := a.s3.CreateBucket(acBucket); err != nil {
		t.Fatal(err)
	}
	a.s3h = gofakes3.New(a.s3, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	return a
}

// serve starts the server and points the process's AWS configuration at
// it (the AWS SDK reads the process environment, not the CLI's).
func (a *fakeAWS) serve(t *testing.T) {
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	home := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.URL, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "none"), "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_MAX_ATTEMPTS": "1", "AWS_ENDPOINT_URL_S3": "", "AWS_ENDPOINT_URL_CLOUDFORMATION": "",
	} {
		t.Setenv(k, v)
		if v == "" {
			os.Unsetenv(k)
		}
	}
	oldF, oldM, oldP := cfnstack.PollFirst, cfnstack.PollMax, agentcore.Poll
	cfnstack.PollFirst, cfnstack.PollMax, agentcore.Poll = time.Millisecond, 2*time.Millisecond, time.Millisecond
	restore := agent.SetBuildPoll(time.Millisecond)
	t.Cleanup(func() { cfnstack.PollFirst, cfnstack.PollMax, agentcore.Poll = oldF, oldM, oldP; restore() })
}

func (a *fakeAWS) record(svc, op string, body []byte, h http.Header) {
	var hb bytes.Buffer
	_ = h.Write(&hb)
	a.wire = append(a.wire, append(hb.Bytes(), body...))
	a.calls = append(a.calls, call{svc, op})
	a.bodies[op] = append(a.bodies[op], body)
	a.heads[op] = append(a.heads[op], h.Clone())
}

// take returns the calls so far and forgets them.
func (a *fakeAWS) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.calls))
	for i, c := range a.calls {
		out[i] = c.String()
	}
	a.calls = nil
	a.bodies = map[string][][]byte{}
	a.heads = map[string][]http.Header{}
	return out
}

func (a *fakeAWS) body(op string, i int) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	bs := a.bodies[op]
	if i >= len(bs) {
		a.t.Fatalf("no request %d of %s", i, op)
	}
	var m map[string]any
	if err := json.Unmarshal(bs[i], &m); err != nil {
		a.t.Fatalf("%s body: %v", op, err)
	}
	return m
}

func (a *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	a.mu.Lock()
	defer a.mu.Unlock()
	target := r.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(r.URL.Path, "/"+acBucket+"/"):
		op := map[string]string{http.MethodPut: "PutObject", http.MethodDelete: "DeleteObject", http.MethodHead: "HeadObject", http.MethodGet: "GetObject"}[r.Method]
		a.record("s3", op, nil, r.Header)
		a.bodies[op][len(a.bodies[op])-1] = []byte(r.URL.Path)
		if op == "PutObject" {
			a.zips = append(a.zips, body)
		}
		a.s3h.ServeHTTP(w, r)
	case strings.HasPrefix(target, "CodeBuild_20161006."):
		op := strings.TrimPrefix(target, "CodeBuild_20161006.")
		a.record("codebuild", op, body, r.Header)
		a.codebuild(w, op, body)
	case strings.HasPrefix(target, "AmazonEC2ContainerRegistry_V20150921."):
		op := strings.TrimPrefix(target, "AmazonEC2ContainerRegistry_V20150921.")
		a.record("ecr", op, body, r.Header)
		a.ecr(w, op, body)
	case strings.HasPrefix(r.URL.Path, "/runtimes/") && strings.HasSuffix(r.URL.Path, "/invocations"):
		a.record("bedrock-agentcore", "InvokeAgentRuntime", body, r.Header)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"answer":"hello from the runtime"}`)
	case strings.HasPrefix(r.URL.Path, "/runtimes"):
		a.control(w, r, body)
	case r.Method == http.MethodPost && r.URL.Path == "/":
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") == "GetCallerIdentity" {
			a.record("sts", "GetCallerIdentity", body, r.Header)
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::%s:user/dev</Arn><UserId>AIDAEXAMPLE</UserId><Account>%s</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`, acAccount, acAccount)
			return
		}
		a.record("cloudformation", form.Get("Action"), body, r.Header)
		a.cfn(w, form)
	default:
		a.record("unknown", r.Method+" "+r.URL.Path, body, r.Header)
		w.WriteHeader(http.StatusNotFound)
	}
}

func jsonError(w http.ResponseWriter, code int, typ string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"__type":%q,"message":"AWS's own message text, never printed"}`, typ)
}

func (a *fakeAWS) ecr(w http.ResponseWriter, op string, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch op {
	case "DescribeRepositories":
		if !a.repo {
			jsonError(w, 400, "RepositoryNotFoundException")
			return
		}
		fmt.Fprintf(w, `{"repositories":[{"repositoryName":"rayito-agent-support-bot","repositoryArn":"arn:aws:ecr:us-east-1:%s:repository/rayito-agent-support-bot","repositoryUri":%q}]}`, acAccount, acRepoURI)
	case "ListTagsForResource":
		fmt.Fprintf(w, `{"tags":%s}`, a.repoTags)
	case "DescribeImages":
		var in struct {
			ImageIds []struct {
				ImageTag string `json:"imageTag"`
			} `json:"imageIds"`
		}
		_ = json.Unmarshal(body, &in)
		if len(in.ImageIds) != 1 || a.images[in.ImageIds[0].ImageTag] == "" {
			jsonError(w, 400, "ImageNotFoundException")
			return
		}
		fmt.Fprintf(w, `{"imageDetails":[{"imageDigest":%q,"imageTags":[%q]}]}`, a.images[in.ImageIds[0].ImageTag], in.ImageIds[0].ImageTag)
	default:
		jsonError(w, 400, "InvalidParameterException")
	}
}

func (a *fakeAWS) codebuild(w http.ResponseWriter, op string, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	const id = "rayito-agentcore-support-bot:0b5c7d2e"
	switch op {
	case "StartBuild":
		var in struct {
			Env []struct{ Name, Value string } `json:"environmentVariablesOverride"`
		}
		_ = json.Unmarshal(body, &in)
		for _, e := range in.Env {
			if e.Name == "IMAGE_TAG" {
				a.lastTag = e.Value
			}
		}
		a.buildPolls = 0
		fmt.Fprintf(w, `{"build":{"id":%q,"buildStatus":"IN_PROGRESS","currentPhase":"QUEUED"}}`, id)
	case "BatchGetBuilds":
		a.buildPolls++
		if a.onBuildPoll != nil {
			a.onBuildPoll()
		}
		switch {
		case a.buildPolls == 1:
			fmt.Fprintf(w, `{"builds":[{"id":%q,"buildStatus":"IN_PROGRESS","currentPhase":"BUILD","buildComplete":false}]}`, id)
		case a.buildFail:
			fmt.Fprintf(w, `{"builds":[{"id":%q,"buildStatus":"FAILED","currentPhase":"COMPLETED","buildComplete":true,"phases":[`+
				`{"phaseType":"SUBMITTED","phaseStatus":"SUCCEEDED"},{"phaseType":"DOWNLOAD_SOURCE","phaseStatus":"SUCCEEDED"},`+
				`{"phaseType":"BUILD","phaseStatus":"FAILED","contexts":[{"statusCode":"COMMAND_EXECUTION_ERROR","message":"log text: docker build said `+acCanary+`"}]},`+
				`{"phaseType":"COMPLETED"}]}]}`, id)
		default:
			a.images[a.lastTag] = "sha256:" + strings.Repeat("ab", 32)
			fmt.Fprintf(w, `{"builds":[{"id":%q,"buildStatus":"SUCCEEDED","currentPhase":"COMPLETED","buildComplete":true}]}`, id)
		}
	default:
		jsonError(w, 400, "InvalidInputException")
	}
}

func (a *fakeAWS) runtimeByID(id string) *fakeRuntime {
	for _, rt := range a.runtimes {
		if rt.id == id && !rt.gone {
			return rt
		}
	}
	return nil
}

func (a *fakeAWS) control(w http.ResponseWriter, r *http.Request, body []byte) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/runtimes"), "/")
	op := map[string]string{"POST": "ListAgentRuntimes", "PUT": "CreateAgentRuntime"}[r.Method]
	if rest != "" {
		op = map[string]string{"GET": "GetAgentRuntime", "PUT": "UpdateAgentRuntime", "DELETE": "DeleteAgentRuntime"}[r.Method]
	}
	a.record("bedrock-agentcore-control", op, body, r.Header)
	w.Header().Set("Content-Type", "application/json")
	notFound := func() {
		w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"not found"}`)
	}
	var in struct {
		Description string `json:"description"`
		Metadata    *struct {
			RequireMMDSV2 bool `json:"requireMMDSV2"`
		} `json:"metadataConfiguration"`
	}
	_ = json.Unmarshal(body, &in)
	switch op {
	case "ListAgentRuntimes":
		var items []string
		for _, rt := range a.runtimes {
			if !rt.gone {
				items = append(items, fmt.Sprintf(`{"agentRuntimeName":%q,"agentRuntimeId":%q,"agentRuntimeArn":%q,"description":%q,"status":"READY","agentRuntimeVersion":"1"}`, rt.name, rt.id, rt.arn, rt.description))
			}
		}
		fmt.Fprintf(w, `{"agentRuntimes":[%s]}`, strings.Join(items, ","))
	case "CreateAgentRuntime":
		rt := &fakeRuntime{name: acRuntime, id: "rayito_support_bot-AbCdEf1234", description: in.Description, pending: 1, transit: "CREATING"}
		rt.arn = "arn:aws:bedrock-agentcore:us-east-1:" + acAccount + ":runtime/" + rt.id
		a.runtimes = append(a.runtimes, rt)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"agentRuntimeArn":%q,"agentRuntimeId":%q,"agentRuntimeVersion":"1","status":"CREATING"}`, rt.arn, rt.id)
	case "UpdateAgentRuntime":
		rt := a.runtimeByID(rest)
		if rt == nil {
			notFound()
			return
		}
		rt.pending, rt.transit = 1, "UPDATING"
		if in.Metadata != nil {
			rt.mmds = in.Metadata.RequireMMDSV2
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"agentRuntimeArn":%q,"agentRuntimeId":%q,"agentRuntimeVersion":"2","status":"UPDATING"}`, rt.arn, rt.id)
	case "GetAgentRuntime":
		rt := a.runtimeByID(rest)
		if rt == nil {
			notFound()
			return
		}
		status := "READY"
		if a.stuck {
			rt.pending = 1
		}
		if rt.pending > 0 {
			rt.pending--
			status = rt.transit
		}
		meta := ""
		if rt.mmds {
			meta = `,"metadataConfiguration":{"requireMMDSV2":true}`
		}
		fmt.Fprintf(w, `{"agentRuntimeArn":%q,"agentRuntimeId":%q,"agentRuntimeName":%q,"agentRuntimeVersion":"1","description":%q,"roleArn":"arn:aws:iam::%s:role/x","status":%q%s}`,
			rt.arn, rt.id, rt.name, rt.description, acAccount, status, meta)
	case "DeleteAgentRuntime":
		rt := a.runtimeByID(rest)
		if rt == nil {
			notFound()
			return
		}
		rt.gone = true
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"DELETING"}`)
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

func (a *fakeAWS) cfn(w http.ResponseWriter, form url.Values) {
	action, name := form.Get("Action"), form.Get("StackName")
	st := a.stack
	if st != nil && name != acStack && name != st.id {
		st = nil
	}
	if st != nil && st.status == "DELETE_COMPLETE" && name == acStack {
		st = nil
	}
	switch action {
	case "DescribeStacks":
		if st == nil {
			cfntest.Error(w, "ValidationError", "Stack with id "+name+" does not exist")
			return
		}
		cur := st.status
		if len(st.script) > 0 {
			st.status, st.script = st.script[0], st.script[1:]
		}
		cfntest.Reply(w, action, fmt.Sprintf(`<Stacks><member><StackId>%s</StackId><StackName>%s</StackName><Description>%s</Description><StackStatus>%s</StackStatus>`+
			`<CreationTime>2026-01-01T00:00:00Z</CreationTime><Outputs>`+
			`<member><OutputKey>RuntimeRoleArn</OutputKey><OutputValue>arn:aws:iam::%s:role/rayito-agentcore-support-bot-us-east-1</OutputValue></member>`+
			`<member><OutputKey>RepositoryUri</OutputKey><OutputValue>%s</OutputValue></member>`+
			`<member><OutputKey>BuildProjectName</OutputKey><OutputValue>rayito-agentcore-support-bot</OutputValue></member>`+
			`</Outputs></member></Stacks>`, cfntest.Esc(st.id), acStack, cfntest.Esc("Rayito agent on Amazon Bedrock AgentCore (security model T36), one stack per agent"), cur, acAccount, acRepoURI))
	case "CreateStack":
		script := slices.Clone(a.createScript)
		a.stack = &fakeStack{id: "arn:aws:cloudformation:us-east-1:" + acAccount + ":stack/" + acStack + "/1", status: script[0], script: script[1:], token: form.Get("ClientRequestToken")}
		if a.rollback {
			a.stack.events = [][3]string{{acStack, "CREATE_IN_PROGRESS", ""}, {"Repository", "CREATE_FAILED", "Resource handler returned message: \"bucket\nnot found\""}, {"RuntimeRole", "CREATE_FAILED", "Resource creation cancelled"}}
		}
		a.repo = !a.rollback
		cfntest.Reply(w, action, "<StackId>"+a.stack.id+"</StackId>")
	case "UpdateStack":
		if st == nil {
			cfntest.Error(w, "ValidationError", "Stack ["+name+"] does not exist")
			return
		}
		if a.noUpdates {
			cfntest.Error(w, "ValidationError", "No updates are to be performed.")
			return
		}
		st.status, st.script, st.token = "UPDATE_IN_PROGRESS", []string{"UPDATE_COMPLETE"}, form.Get("ClientRequestToken")
		cfntest.Reply(w, action, "<StackId>"+st.id+"</StackId>")
	case "DeleteStack":
		if st != nil {
			st.status, st.script, st.token = "DELETE_IN_PROGRESS", []string{"DELETE_COMPLETE"}, form.Get("ClientRequestToken")
			a.repo = false
		}
		cfntest.Reply(w, action, "")
	case "DescribeStackEvents":
		if st == nil {
			cfntest.Error(w, "ValidationError", "Stack ["+name+"] does not exist")
			return
		}
		var b strings.Builder
		b.WriteString("<StackEvents>")
		for i := len(st.events) - 1; i >= 0; i-- {
			ev := st.events[i]
			fmt.Fprintf(&b, "<member><StackId>%s</StackId><StackName>%s</StackName><EventId>e%d</EventId><LogicalResourceId>%s</LogicalResourceId>"+
				"<ResourceStatus>%s</ResourceStatus><ResourceStatusReason>%s</ResourceStatusReason><ClientRequestToken>%s</ClientRequestToken>"+
				"<Timestamp>2026-01-01T00:00:%02dZ</Timestamp></member>", cfntest.Esc(st.id), acStack, i, ev[0], ev[1], cfntest.Esc(ev[2]), cfntest.Esc(st.token), i)
		}
		b.WriteString("</StackEvents>")
		cfntest.Reply(w, action, b.String())
	default:
		cfntest.Error(w, "InvalidAction", "unknown action")
	}
}

// elfHost writes a minimal little-endian ELF64 executable of machine.
func elfHost(t *testing.T, machine uint16) string {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1
	binary.LittleEndian.PutUint16(h[16:], 2)
	binary.LittleEndian.PutUint16(h[18:], machine)
	binary.LittleEndian.PutUint32(h[20:], 1)
	binary.LittleEndian.PutUint16(h[52:], 64)
	binary.LittleEndian.PutUint16(h[54:], 56)
	binary.LittleEndian.PutUint16(h[58:], 64)
	p := filepath.Join(t.TempDir(), "rayito-agent-host")
	if err := os.WriteFile(p, append(h, bytes.Repeat([]byte("host "), 200)...), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// acProject is the test's agent project: testdata/agentcore's file, an
// agent.py, and what deploy must skip (.git, a symbolic link).
func acProject(t *testing.T) string {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/agentcore/rayito-agent.toml")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"rayito-agent.toml": string(src), "agent.py": "print('hi')\n", ".git/config": "[core]\n", "lib/util.py": "X = 1\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func acDeployArgs(dir, host string, extra ...string) []string {
	return append([]string{"agent", "deploy", "--target", "agentcore", "--region", acRegion, "--account", acAccount,
		"--artifact-bucket", acBucket, "--host-binary", host}, append(extra, dir)...)
}

func wantCalls(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: the calls on the wire:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// s3Keys lists the bucket's keys.
func (a *fakeAWS) s3Keys(t *testing.T) []string {
	res, err := a.s3.ListBucket(acBucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range res.Contents {
		keys = append(keys, o.Key)
	}
	return keys
}

var (
	firstDeploy = []string{
		"bedrock-agentcore-control ListAgentRuntimes",
		"ecr DescribeRepositories",
		"cloudformation DescribeStacks",
		"cloudformation CreateStack",
		"cloudformation DescribeStacks",
		"cloudformation DescribeStacks",
		"ecr DescribeImages",
		"s3 PutObject",
		"codebuild StartBuild",
		"codebuild BatchGetBuilds",
		"codebuild BatchGetBuilds",
		"s3 DeleteObject",
		"ecr DescribeImages",
		"bedrock-agentcore-control CreateAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
		"bedrock-agentcore-control UpdateAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
	}
	redeploy = []string{
		"bedrock-agentcore-control ListAgentRuntimes",
		"ecr DescribeRepositories",
		"ecr ListTagsForResource",
		"cloudformation DescribeStacks",
		"cloudformation UpdateStack",
		"ecr DescribeImages",
		"bedrock-agentcore-control UpdateAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
	}
	deleteCalls = []string{
		"bedrock-agentcore-control ListAgentRuntimes",
		"ecr DescribeRepositories",
		"ecr ListTagsForResource",
		"cloudformation DescribeStacks",
		"bedrock-agentcore-control DeleteAgentRuntime",
		"bedrock-agentcore-control GetAgentRuntime",
		"cloudformation DeleteStack",
		"cloudformation DescribeStacks",
		"cloudformation DescribeStacks",
	}
)

// TestAgentCoreDeployInvokeDelete: a first deploy (the stack created, the
// context uploaded, built and deleted, the runtime created by digest and
// MMDSv2 required), a redeploy of the same code (no upload, no build: the
// runtime updated with MMDSv2), invoke, and delete, each as its exact
// sequence of calls on the wire; the key request fields; no secret value
// anywhere.
func TestAgentCoreDeployInvokeDelete(t *testing.T) {
	a := newFakeAWS(t)
	a.serve(t)
	env, state := testEnv(t)
	// The canary is the secret's value where a careless CLI could find
	// it: the environment variable of the secret's name, in the CLI's
	// and the process's environments. It must reach no request.
	env["GITHUB_TOKEN"] = acCanary
	t.Setenv("GITHUB_TOKEN", acCanary)
	dir := acProject(t)
	host := elfHost(t, 183)
	var outputs strings.Builder
	runAll := func(args ...string) result {
		r := run(t, env, args...)
		outputs.WriteString(r.out + r.err)
		return r
	}

	r := runAll(acDeployArgs(dir, host)...)
	if r.code != 0 {
		t.Fatalf("first deploy: exit %d: %s", r.code, r.err)
	}
	// The key fields, read before take() forgets the bodies.
	put := a.bodies["PutObject"][0]
	key := strings.TrimPrefix(string(put), "/"+acBucket+"/")
	if !strings.HasPrefix(key, agentcore.ArtifactPrefix+"support-bot/") || !strings.HasSuffix(key, ".zip") || len(key) != len(agentcore.ArtifactPrefix+"support-bot/")+64+4 {
		t.Errorf("the context's key %q", key)
	}
	sum := strings.TrimSuffix(strings.TrimPrefix(key, agentcore.ArtifactPrefix+"support-bot/"), ".zip")
	sb := a.body("StartBuild", 0)
	if sb["projectName"] != "rayito-agentcore-support-bot" || sb["sourceTypeOverride"] != "S3" || sb["sourceLocationOverride"] != acBucket+"/"+key {
		t.Errorf("StartBuild %v", sb)
	}
	if ev, _ := json.Marshal(sb["environmentVariablesOverride"]); !strings.Contains(string(ev), `"name":"IMAGE_TAG"`) || !strings.Contains(string(ev), `"value":"`+sum[:16]+`"`) {
		t.Errorf("StartBuild's IMAGE_TAG: %s", ev)
	}
	cr := a.body("CreateAgentRuntime", 0)
	wantURI := acRepoURI + "@sha256:" + strings.Repeat("ab", 32)
	if cr["agentRuntimeName"] != acRuntime || cr["description"] != agentcore.Marker || cr["roleArn"] != "arn:aws:iam::"+acAccount+":role/rayito-agentcore-support-bot-us-east-1" {
		t.Errorf("CreateAgentRuntime %v", cr)
	}
	if c, _ := json.Marshal(cr["agentRuntimeArtifact"]); string(c) != `{"containerConfiguration":{"containerUri":"`+wantURI+`"}}` {
		t.Errorf("containerUri: %s", c)
	}
	if n, _ := json.Marshal(cr["networkConfiguration"]); string(n) != `{"networkMode":"PUBLIC"}` {
		t.Errorf("network: %s", n)
	}
	if p, _ := json.Marshal(cr["protocolConfiguration"]); string(p) != `{"serverProtocol":"HTTP"}` {
		t.Errorf("protocol: %s", p)
	}
	envs, _ := cr["environmentVariables"].(map[string]any)
	if len(envs) != 1 || !strings.Contains(fmt.Sprint(envs[secretenv.Variable]), "GITHUB_TOKEN") || cr["clientToken"] == nil {
		t.Errorf("environment %v", envs)
	}
	if _, ok := cr["metadataConfiguration"]; ok {
		t.Error("CreateAgentRuntime does not take metadataConfiguration in v1.81")
	}
	up := a.body("UpdateAgentRuntime", 0)
	if m, _ := json.Marshal(up["metadataConfiguration"]); string(m) != `{"requireMMDSV2":true}` || up["description"] != agentcore.Marker {
		t.Errorf("the MMDSv2 update: %v", up)
	}
	cs, _ := url.ParseQuery(string(a.bodies["CreateStack"][0]))
	params := map[string]string{}
	for i := 1; cs.Get(fmt.Sprintf("Parameters.member.%d.ParameterKey", i)) != ""; i++ {
		params[cs.Get(fmt.Sprintf("Parameters.member.%d.ParameterKey", i))] = cs.Get(fmt.Sprintf("Parameters.member.%d.ParameterValue", i))
	}
	if cs.Get("Capabilities.member.1") != "CAPABILITY_NAMED_IAM" || cs.Get("TemplateBody") != agentcore.RuntimeTemplate || params["AgentName"] != "support-bot" ||
		params["RuntimeName"] != acRuntime || params["EcrRepositoryName"] != "rayito-agent-support-bot" || params["ArtifactBucket"] != acBucket ||
		params["ArtifactPrefix"] != agentcore.ArtifactPrefix || !strings.Contains(params["ReadableSecretArns"], "secret:github-token-AbC123") ||
		!strings.Contains(params["ReadableSecretArns"], ",") || !strings.HasPrefix(params["BedrockModelArns"], "arn:aws:bedrock:us-east-1::foundation-model/") {
		t.Errorf("CreateStack: capabilities %q, parameters %v", cs.Get("Capabilities.member.1"), params)
	}
	wantCalls(t, "first deploy", a.take(), firstDeploy)
	if keys := a.s3Keys(t); len(keys) != 0 {
		t.Errorf("the context is left in the bucket: %v", keys)
	}
	if !strings.Contains(r.out, wantURI) || !strings.Contains(r.out, "rayito agent invoke support-bot") {
		t.Errorf("summary:\n%s", r.out)
	}
	rec, err := os.ReadFile(filepath.Join(state, "rayito", "agents", "support-bot.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rm map[string]any
	if err := json.Unmarshal(rec, &rm); err != nil || rm["target"] != "agentcore" || rm["region"] != acRegion || rm["runtime_id"] != "rayito_support_bot-AbCdEf1234" ||
		rm["runtime_arn"] == nil || rm["service_token"] != nil {
		t.Errorf("record %s", rec)
	}

	// The same code again: the image is in ECR.
	a.noUpdates = true
	r = runAll(acDeployArgs(dir, host, "--json")...)
	if r.code != 0 {
		t.Fatalf("redeploy: exit %d: %s", r.code, r.err)
	}
	up = a.body("UpdateAgentRuntime", 0)
	if m, _ := json.Marshal(up["metadataConfiguration"]); string(m) != `{"requireMMDSV2":true}` || up["agentRuntimeId"] != nil && up["agentRuntimeId"] != "" {
		t.Errorf("redeploy's update: %v", up)
	}
	if c, _ := json.Marshal(up["agentRuntimeArtifact"]); string(c) != `{"containerConfiguration":{"containerUri":"`+wantURI+`"}}` {
		t.Errorf("redeploy's containerUri: %s", c)
	}
	wantCalls(t, "redeploy", a.take(), redeploy)
	var out map[string]any
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || out["built"] != false || out["stack_action"] != "none" || out["runtime_action"] != "update" || out["mmdsv2"] != true {
		t.Errorf("redeploy --json: %s", r.out)
	}

	if r = runAll("agent", "list"); r.out != "support-bot\tagentcore\tus-east-1 rayito_support_bot-AbCdEf1234\n" {
		t.Errorf("list: %q", r.out)
	}
	if len(a.take()) != 0 {
		t.Error("list asked AWS")
	}

	// Invoke: the data plane, with a new session id of AgentCore's length.
	r = runAll("agent", "invoke", "--payload", `{"prompt":"hi"}`, "support-bot")
	if r.code != 0 || r.out != `{"answer":"hello from the runtime"}` {
		t.Fatalf("invoke: exit %d, out %q, err %s", r.code, r.out, r.err)
	}
	h := a.heads["InvokeAgentRuntime"][0]
	if s := h.Get("X-Amzn-Bedrock-Agentcore-Runtime-Session-Id"); len(s) < 33 || h.Get("Content-Type") != "application/json" || h.Get("Authorization") == "" {
		t.Errorf("invoke headers: session %q, content type %q", s, h.Get("Content-Type"))
	}
	if string(a.bodies["InvokeAgentRuntime"][0]) != `{"prompt":"hi"}` {
		t.Errorf("invoke payload %q", a.bodies["InvokeAgentRuntime"][0])
	}
	wantCalls(t, "invoke", a.take(), []string{"bedrock-agentcore InvokeAgentRuntime"})
	r = runAll("agent", "invoke", "--json", "--session", strings.Repeat("s", 40), "support-bot")
	if r.code != 0 || !strings.Contains(r.out, `"answer": {`) || !strings.Contains(r.out, `"session_id": "`+strings.Repeat("s", 40)+`"`) {
		t.Errorf("invoke --json: %d %s %s", r.code, r.out, r.err)
	}
	a.take()
	r = runAll("agent", "invoke", "--session", "short", "support-bot")
	if r.code != 2 || len(a.take()) != 0 {
		t.Errorf("a short --session: exit %d", r.code)
	}

	// Delete: the runtime, waited until gone, the stack, the record.
	r = runAll("agent", "delete", "support-bot")
	if r.code != 0 {
		t.Fatalf("delete: exit %d: %s", r.code, r.err)
	}
	wantCalls(t, "delete", a.take(), deleteCalls)
	if _, err := os.Stat(filepath.Join(state, "rayito", "agents", "support-bot.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record is left: %v", err)
	}
	// No request and no output holds the canary.
	a.mu.Lock()
	for _, w := range a.wire {
		if bytes.Contains(w, []byte(acCanary)) {
			t.Errorf("the canary on the wire: %.200s", w)
		}
	}
	a.mu.Unlock()
	if strings.Contains(outputs.String(), acCanary) {
		t.Error("the canary in an output")
	}
}

// TestAgentCoreFailedBuild: a failed build names its id and phase, never
// the build's log text, deletes the context object, and makes no runtime
// call.
func TestAgentCoreFailedBuild(t *testing.T) {
	a := newFakeAWS(t)
	a.buildFail = true
	a.serve(t)
	env, state := testEnv(t)
	// Without --account: the account is asked of STS first.
	r := run(t, env, "agent", "deploy", "--target", "agentcore", "--region", acRegion, "--artifact-bucket", acBucket, "--host-binary", elfHost(t, 183), acProject(t))
	if r.code != 1 || !strings.Contains(r.err, "build_failed") || !strings.Contains(r.err, "rayito-agentcore-support-bot:0b5c7d2e") ||
		!strings.Contains(r.err, "phase BUILD") || strings.Contains(r.err, acCanary) || strings.Contains(r.err, "docker build said") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantCalls(t, "failed build", a.take(), append([]string{"sts GetCallerIdentity"}, firstDeploy[:12]...))
	// The same project again (another stage directory, other file times):
	// the same zip, byte for byte, under the same key; it holds the
	// Dockerfile, the project's regular files and the host, no .git and
	// no symbolic link.
	dir := acProject(t)
	r = run(t, env, acDeployArgs(dir, elfHost(t, 183))...)
	if r.code != 1 {
		t.Fatalf("again: exit %d: %s", r.code, r.err)
	}
	again := a.take()
	wantCalls(t, "the failed build again", again, []string{
		"bedrock-agentcore-control ListAgentRuntimes", "ecr DescribeRepositories", "ecr ListTagsForResource",
		"cloudformation DescribeStacks", "cloudformation UpdateStack", "cloudformation DescribeStacks", "cloudformation DescribeStacks",
		"ecr DescribeImages", "s3 PutObject", "codebuild StartBuild", "codebuild BatchGetBuilds", "codebuild BatchGetBuilds", "s3 DeleteObject",
	})
	if len(a.zips) != 2 || !bytes.Equal(a.zips[0], a.zips[1]) {
		t.Fatalf("two uploads of the same project differ (%d uploads; %.40q, %.40q)", len(a.zips), a.zips[0], a.zips[len(a.zips)-1])
	}
	zr, err := zip.NewReader(bytes.NewReader(a.zips[0]), int64(len(a.zips[0])))
	if err != nil {
		t.Fatalf("the upload is not a zip: %v", err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != "Dockerfile app/agent.py app/lib/util.py app/rayito-agent.toml bin/rayito-agent-host" {
		t.Errorf("the context's entries: %s", got)
	}
	if keys := a.s3Keys(t); len(keys) != 0 {
		t.Errorf("the context is left in the bucket: %v", keys)
	}
	if _, err := os.Stat(filepath.Join(state, "rayito", "agents", "support-bot.json")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a record of a failed deploy")
	}
}

// TestAgentCoreStackRollback: a stack that rolls back names its first
// failed resource, with its reason on one line, and nothing is uploaded.
func TestAgentCoreStackRollback(t *testing.T) {
	a := newFakeAWS(t)
	a.rollback = true
	a.createScript = []string{"CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE"}
	a.serve(t)
	env, _ := testEnv(t)
	r := run(t, env, acDeployArgs(acProject(t), elfHost(t, 183))...)
	var se *cfnstack.Error
	if r.code != 1 || !errors.As(r.e, &se) || se.Reason != cfnstack.ReasonFailed || se.Resource != "Repository" || se.Status != "ROLLBACK_COMPLETE" ||
		strings.Contains(se.ResourceReason, "\n") {
		t.Fatalf("exit %d: %v", r.code, r.e)
	}
	wantCalls(t, "rollback", a.take(), []string{
		"bedrock-agentcore-control ListAgentRuntimes", "ecr DescribeRepositories",
		"cloudformation DescribeStacks", "cloudformation CreateStack",
		"cloudformation DescribeStacks", "cloudformation DescribeStacks", "cloudformation DescribeStacks",
		"cloudformation DescribeStackEvents",
	})
}

// TestAgentCoreRefusals: name_conflict and cdk_managed are found by reads
// alone, before anything is written (deploy and delete); flags are
// checked before AWS is asked anything.
func TestAgentCoreRefusals(t *testing.T) {
	ours := &fakeRuntime{name: acRuntime, id: "rt-1", arn: "arn:aws:bedrock-agentcore:us-east-1:111122223333:runtime/rt-1"}
	for _, c := range []struct {
		name, desc string
		repoTags   string
		code       string
		calls      []string
	}{
		{"name conflict", "someone's runtime", "", agentcore.CodeNameConflict, []string{"bedrock-agentcore-control ListAgentRuntimes"}},
		{"cdk runtime", agentcore.MarkerCDK, "", agentcore.CodeCDKManaged, []string{"bedrock-agentcore-control ListAgentRuntimes"}},
		{"cdk repository", agentcore.Marker, `[{"Key":"` + agentcore.ManagedByTag + `","Value":"` + agentcore.ManagedByCDK + `"}]`, agentcore.CodeCDKManaged,
			[]string{"bedrock-agentcore-control ListAgentRuntimes", "ecr DescribeRepositories", "ecr ListTagsForResource"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newFakeAWS(t)
			rt := *ours
			rt.description = c.desc
			a.runtimes = []*fakeRuntime{&rt}
			if c.repoTags != "" {
				a.repo, a.repoTags = true, c.repoTags
			}
			a.serve(t)
			env, state := testEnv(t)
			dir := acProject(t)
			before := snapshot(t, state, dir)
			r := run(t, env, acDeployArgs(dir, elfHost(t, 183))...)
			if r.code != 1 || !errors.Is(r.e, agentcore.ErrPlan) || !strings.Contains(r.err, c.code) {
				t.Fatalf("deploy: exit %d: %s", r.code, r.err)
			}
			wantCalls(t, "deploy", a.take(), c.calls)
			r = run(t, env, "agent", "delete", "--target", "agentcore", "--region", acRegion, "support-bot")
			if r.code != 1 || !strings.Contains(r.err, c.code) {
				t.Fatalf("delete: exit %d: %s", r.code, r.err)
			}
			wantCalls(t, "delete", a.take(), c.calls)
			if !sameSnapshot(before, snapshot(t, state, dir)) {
				t.Error("a refusal wrote a file")
			}
		})
	}
	a := newFakeAWS(t)
	a.serve(t)
	env, _ := testEnv(t)
	dir := acProject(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"no bucket", []string{"agent", "deploy", "--target", "agentcore", "--region", acRegion, "--account", acAccount, "--host-binary", elfHost(t, 183), dir}},
		{"amd64 host", acDeployArgs(dir, elfHost(t, 62))},
		{"not ELF", acDeployArgs(dir, filepath.Join(dir, "agent.py"))},
		{"base image by tag", acDeployArgs(dir, elfHost(t, 183), "--base-image", "public.ecr.aws/docker/library/python:3.12-slim")},
		{"base image with a newline", acDeployArgs(dir, elfHost(t, 183), "--base-image", "x/y@sha256:"+strings.Repeat("0", 64)+"\nRUN curl evil")},
	} {
		r := run(t, env, c.args...)
		if r.code != 2 {
			t.Errorf("%s: exit %d: %s", c.name, r.code, r.err)
		}
	}
	wantCalls(t, "usage errors", a.take(), nil)
}

// runCtx is run with ctx (a test's Ctrl-C).
func runCtx(t *testing.T, ctx context.Context, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, Env: func(k string) string { return env[k] }}
	e := app.NewRoot(f).Run(ctx, append([]string{"rayito"}, args...))
	msg, code := cliutil.Exit(e)
	if msg != "" {
		errb.WriteString("rayito: " + msg + "\n")
	}
	return result{out: out.String(), err: errb.String(), code: code, e: e}
}

// TestAgentCoreInterruptedBuild: Ctrl-C during the build exits 130 and
// still deletes the context object (a fresh bounded context), with no
// runtime call.
func TestAgentCoreInterruptedBuild(t *testing.T) {
	a := newFakeAWS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.onBuildPoll = cancel
	a.serve(t)
	env, _ := testEnv(t)
	r := runCtx(t, ctx, env, acDeployArgs(acProject(t), elfHost(t, 183))...)
	if r.code != 130 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantCalls(t, "interrupted", a.take(), append(slices.Clone(firstDeploy[:10]), "s3 DeleteObject"))
	if keys := a.s3Keys(t); len(keys) != 0 {
		t.Errorf("the context is left in the bucket: %v", keys)
	}
}

// TestAgentCoreWaitTimeout: a runtime that never gets READY within
// --wait-timeout exits 124, and no record is written.
func TestAgentCoreWaitTimeout(t *testing.T) {
	a := newFakeAWS(t)
	a.stuck = true
	a.serve(t)
	env, state := testEnv(t)
	r := run(t, env, acDeployArgs(acProject(t), elfHost(t, 183), "--wait-timeout", "2s")...)
	if r.code != 124 || !strings.Contains(r.err, "--wait-timeout") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if _, err := os.Stat(filepath.Join(state, "rayito", "agents", "support-bot.json")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a record of a deploy that timed out")
	}
}
