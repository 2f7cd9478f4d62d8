package tests

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeAgentCoreAWS answers the reads of `rayito agent deploy --target
// agentcore`'s preflight (STS GetCallerIdentity, AgentCore
// ListAgentRuntimes, ECR DescribeRepositories and ListTagsForResource)
// and records every request; anything else is a write the preflight must
// never make.
type fakeAgentCoreAWS struct {
	mu          sync.Mutex
	calls       []string
	description string
}

func (f *fakeAgentCoreAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	target := r.Header.Get("X-Amz-Target")
	call := r.Method + " " + r.URL.Path + " " + target
	if strings.Contains(string(body), "Action=GetCallerIdentity") {
		call = "sts:GetCallerIdentity"
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	switch {
	case call == "sts:GetCallerIdentity":
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/dev</Arn><UserId>AIDA</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	case r.Method == http.MethodPost && r.URL.Path == "/runtimes/":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"agentRuntimes":[{"agentRuntimeName":"rayito_bot","agentRuntimeId":"rayito_bot-AbC123","description":"`+f.description+`"}]}`)
	case strings.HasSuffix(target, ".DescribeRepositories"):
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(400)
		io.WriteString(w, `{"__type":"RepositoryNotFoundException","message":"none"}`)
	default:
		w.WriteHeader(500)
	}
}

// TestAgentDeployAgentCorePreflight: the real CLI, against a fake AWS
// (AWS_ENDPOINT_URL), refuses before writing anything a runtime a CDK
// stack declares (cdk_managed) and one Rayito did not create
// (name_conflict); with a runtime of its own it goes as far as is built
// (Unimplemented), still without a write.
func TestAgentDeployAgentCorePreflight(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rayito-agent.toml"), []byte("name = \"bot\"\ncommand = [\"python3\", \"agent.py\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		description, want string
	}{
		{"rayito.agentcore/1+cdk", "cdk_managed"},
		{"made by hand", "name_conflict"},
		{"rayito.agentcore/1", "is not implemented"},
	} {
		fake := &fakeAgentCoreAWS{description: c.description}
		srv := httptest.NewServer(fake)
		env := append(cliEnv(t), "AWS_ENDPOINT_URL="+srv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDEXAMPLE",
			"AWS_SECRET_ACCESS_KEY=example", "AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		r := runCLI(t, env, "agent", "deploy", "--target", "agentcore", dir)
		srv.Close()
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: %+v", c.description, r)
		}
		for _, call := range fake.calls {
			if call != "sts:GetCallerIdentity" && call != "POST /runtimes/ " && !strings.HasSuffix(call, ".DescribeRepositories") {
				t.Errorf("%s: the preflight made %q", c.description, call)
			}
		}
		if len(fake.calls) < 2 {
			t.Errorf("%s: calls %q", c.description, fake.calls)
		}
	}
}
