package tests

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestPlatformServesOnlyItsOwner: root's local platform serves root
// alone. Another user of the machine, pointed at it, cannot list, pause
// or kill root's sandboxes, nor mint an auth token (with which such a user
// read a file served from inside root's sandbox); `local status` does not
// report root's platform as that user's; and `rayito run` starts a
// platform of the user's own, saying so.
func TestPlatformServesOnlyItsOwner(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the platform is root's, the client another user")
	}
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer runCLI(t, env, "local", "down", "--state-dir", state)
	r := runCLI(t, env, "sandbox", "create")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	var endpoint string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RAYITO_ENDPOINT="); ok {
			endpoint = v
		}
	}

	u := newOrdinaryUser(t)
	at := []string{"RAYITO_ENDPOINT=" + endpoint}
	for _, args := range [][]string{
		{"sandbox", "list", "--all"},
		{"sandbox", "info", id},
		{"sandbox", "pause", id},
		{"sandbox", "kill", id},
		{"sandbox", "exec", id, "--", "true"},
	} {
		r := u.run(t, at, args...)
		if r.code == 0 || strings.Contains(r.stdout, id) || !strings.Contains(r.stderr, "belongs to another user (uid 0)") {
			t.Errorf("%v as another user: %+v, want a refusal naming the platform's owner", args, r)
		}
	}
	// The raw API too: minting an auth token for root's sandbox.
	if curl, err := exec.LookPath("curl"); err == nil {
		cmd := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "content-type: application/json",
			"-d", `{"expirationInMinutes":5,"allowedPorts":[{"port":8080}]}`, endpoint+"/2025-09-09/microvms/"+id+"/auth-token")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
		var out bytes.Buffer
		cmd.Stdout = &out
		_ = cmd.Run()
		if out.String() != "403" {
			t.Errorf("CreateMicrovmAuthToken as another user: HTTP %s, want 403", out.String())
		}
	} else {
		t.Log("curl is not installed (make deps installs it): the raw API request is not tried")
	}
	// Root's sandbox is untouched.
	r = runCLI(t, env, "sandbox", "info", id, "--json")
	var info struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.State != "RUNNING" {
		t.Fatalf("root's sandbox after the other user's attempts: %+v", r)
	}
	// status does not take root's platform for the user's.
	r = u.run(t, at, "local", "status")
	if r.code != 1 || !strings.Contains(r.stdout, "not running: the local platform at "+endpoint+" belongs to another user (uid 0)") {
		t.Errorf("local status as another user: %+v", r)
	}
	r = u.run(t, at, "local", "status", "--json")
	var st struct {
		Running   bool `json:"running"`
		OtherUser bool `json:"other_user"`
		OwnerUID  int  `json:"owner_uid"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Running || !st.OtherUser || st.OwnerUID != 0 {
		t.Errorf("local status --json as another user: %+v", r)
	}
	// run uses a platform of the user's own and says which.
	if userNamespacesUsable(t, u) {
		r = u.run(t, at, "run", "--no-internet", "--", "echo", "mine")
		if r.code != 0 || r.stdout != "mine\n" || !strings.Contains(r.stderr, "belongs to another user (uid 0)") || !strings.Contains(r.stderr, "started in this process") {
			t.Errorf("run as another user: %+v", r)
		}
	}
}
