package agentcore

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol"
	"github.com/aws/aws-sdk-go-v2/service/ecr"

	"github.com/rayito-dev/rayito/agenthost/project"
)

// controlPlane is a fake of the two read APIs a preflight calls: it
// records every request and fails the test on anything but a read.
type controlPlane struct {
	t           *testing.T
	mu          sync.Mutex
	calls       []string
	description string // of the runtime named like the agent; "" = none
	repoTags    string // JSON tags of the repository; "" = no repository
}

func (c *controlPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	target := r.Header.Get("X-Amz-Target")
	c.mu.Lock()
	c.calls = append(c.calls, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+target))
	c.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		c.t.Errorf("unsigned request %s %s", r.Method, r.URL.Path)
	}
	switch {
	case target == "AmazonEC2ContainerRegistry_V20150921.DescribeRepositories":
		if !strings.Contains(string(body), `"repositoryNames":["rayito-agent-bot"]`) {
			c.t.Errorf("DescribeRepositories body %s", body)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if c.repoTags == "" {
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"RepositoryNotFoundException","message":"not found"}`)
			return
		}
		io.WriteString(w, `{"repositories":[{"repositoryName":"rayito-agent-bot","repositoryArn":"arn:aws:ecr:us-east-1:123456789012:repository/rayito-agent-bot"}]}`)
	case target == "AmazonEC2ContainerRegistry_V20150921.ListTagsForResource":
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		io.WriteString(w, `{"tags":`+c.repoTags+`}`)
	case r.URL.Path == "/runtimes/" && r.Method == http.MethodPost:
		w.Header().Set("Content-Type", "application/json")
		rt := `{"agentRuntimeName":"other","agentRuntimeId":"other-1","description":"x"}`
		if c.description != "" {
			rt += `,{"agentRuntimeName":"rayito_bot","agentRuntimeId":"rayito_bot-AbC123","description":"` + c.description + `"}`
		}
		io.WriteString(w, `{"agentRuntimes":[`+rt+`]}`)
	default:
		c.t.Errorf("a preflight made another request: %s %s %s", r.Method, r.URL.Path, target)
		w.WriteHeader(500)
	}
}

func clients(url string) (*bedrockagentcorecontrol.Client, *ecr.Client) {
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	return bedrockagentcorecontrol.New(bedrockagentcorecontrol.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: creds, RetryMaxAttempts: 1}),
		ecr.New(ecr.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: creds, RetryMaxAttempts: 1})
}

// TestPreflight: before anything is written, a runtime of the agent's
// name without Rayito's marker is name_conflict, one or a repository a
// CDK stack declares is cdk_managed; only reads are made.
func TestPreflight(t *testing.T) {
	p, err := project.Parse([]byte("name = \"bot\"\ncommand = [\"python3\", \"agent.py\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := NewPlan(p, Options{Region: "us-east-1", Account: "123456789012", ArtifactBucket: "my-bucket"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		description, tags string
		code              string
		existing          Existing
	}{
		"new":              {"", "", "", Existing{}},
		"ours":             {"made by " + Marker, `[{"Key":"x","Value":"y"}]`, "", Existing{RuntimeID: "rayito_bot-AbC123", Repository: true}},
		"someone else's":   {"a hand-made runtime", "", CodeNameConflict, Existing{}},
		"the stack's":      {MarkerCDK, "", CodeCDKManaged, Existing{}},
		"stack repository": {Marker, `[{"Key":"rayito:managed-by","Value":"rayito-cdk"}]`, CodeCDKManaged, Existing{}},
	} {
		cp := &controlPlane{t: t, description: c.description, repoTags: c.tags}
		srv := httptest.NewServer(cp)
		ctl, reg := clients(srv.URL)
		got, err := Preflight(context.Background(), pl, ctl, reg)
		srv.Close()
		var pe *Error
		switch {
		case c.code == "" && (err != nil || *got != c.existing):
			t.Errorf("%s: %+v %v", name, got, err)
		case c.code != "" && (!errors.As(err, &pe) || pe.Code != c.code || !errors.Is(err, ErrPlan)):
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
		for _, call := range cp.calls {
			if !strings.Contains(call, "DescribeRepositories") && !strings.Contains(call, "ListTagsForResource") && call != "POST /runtimes/" {
				t.Errorf("%s: a write? %s", name, call)
			}
		}
	}
}
