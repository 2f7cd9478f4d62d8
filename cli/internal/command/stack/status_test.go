package stack

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/cli/internal/cfnstack"
)

func TestStatus(t *testing.T) {
	w := newWorld(t)
	r := w.run("status", "events")
	want := "rayito: stack rayito-events: not_found; no such stack in us-east-1 (deploy it with 'rayito stack deploy events')\n"
	if r.code != 1 || r.err != want || r.out != "" {
		t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %q", r.code, r.out, r.err, want)
	}
	if r := w.run(w.deployArgs()...); r.code != 0 {
		t.Fatalf("deploy: exit %d: %s", r.code, r.err)
	}
	r = w.run("status", "events")
	wantOut := "stack:   rayito-events\nregion:  us-east-1\nstatus:  CREATE_COMPLETE\noutputs:\n" +
		"  EventsTableName    rayito-events-EventsTable-ABC\n" +
		"  StackKeySecretArn  arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/events/rayito-events/stack-key-xyz\n"
	if r.code != 0 || r.out != wantOut || r.err != "" {
		t.Fatalf("exit %d\nstdout %s\nstderr %s\nwant %s", r.code, r.out, r.err, wantOut)
	}
	r = w.run("status", "events", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.code != 0 {
		t.Fatalf("exit %d, %v: %s", r.code, err, r.out)
	}
	wantJSON := map[string]any{
		"stack_name": "rayito-events", "stack_id": "arn:aws:cloudformation:us-east-1:123456789012:stack/rayito-events/1",
		"region": "us-east-1", "status": "CREATE_COMPLETE", "created_at": "2026-01-01T00:00:00Z", "events_stack": true,
		"outputs": map[string]any{
			"EventsTableName":   "rayito-events-EventsTable-ABC",
			"StackKeySecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/events/rayito-events/stack-key-xyz",
		},
	}
	if !reflect.DeepEqual(out, wantJSON) {
		t.Errorf("--json\n%s\nwant %v", r.out, wantJSON)
	}
	// Another name.
	r = w.run("status", "events", "--stack-name", "other")
	if r.code != 1 || !strings.Contains(r.err, "stack other: not_found") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	if got := w.cfn.requests("DescribeStacks"); got[len(got)-1].Form.Get("StackName") != "other" {
		t.Errorf("DescribeStacks of %q", got[len(got)-1].Form.Get("StackName"))
	}
}

// The *Error of status and deploy is typed: errors.As finds its Reason.
func TestErrorTyped(t *testing.T) {
	var err error = notFound("s", "eu-west-1")
	var se *Error
	if !errors.As(err, &se) || se.Reason != ReasonNotFound {
		t.Fatalf("%v", err)
	}
	e := cfnstack.Sanitize("UpdateStack", io.EOF)
	var ae *APIError
	if !errors.As(e, &ae) || ae.Network == "" || errors.Is(e, cfnstack.ErrNoUpdates) {
		t.Fatalf("%#v", e)
	}
	for in, want := range map[string]string{
		"a\nb\x1b[31m" + strings.Repeat("é", 200): "a b [31m" + strings.Repeat("é", 6) + "...",
		"x" + strings.Repeat("é", 20):             "x" + strings.Repeat("é", 9) + "...", // not inside a rune
		" short\r\n":                              "short",
	} {
		if got := cfnstack.OneLine(in, 20); got != want {
			t.Errorf("cfnstack.OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDestroy(t *testing.T) {
	w := newWorld(t)
	if r := w.run(w.deployArgs()...); r.code != 0 {
		t.Fatalf("deploy: exit %d: %s", r.code, r.err)
	}
	before := len(w.cfn.requests(""))

	// Without --yes and no terminal to ask on: refused, nothing sent.
	r := w.run("destroy", "events")
	if r.code != 2 || !strings.Contains(r.err, "rayito: refusing to delete stack rayito-events without --yes (stdin is not a terminal to ask on)") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if len(w.cfn.requests("")) != before {
		t.Fatalf("calls %v", w.cfn.actions()[before:])
	}

	// On a terminal, "n" keeps it.
	old := stdinIsTerminal
	stdinIsTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = old })
	r = runIn(t, "n\n", "destroy", "events")
	if r.code != 1 || !strings.Contains(r.err, "Delete stack rayito-events (CREATE_COMPLETE) in us-east-1? The stack key secret and the events table are kept. [y/N] ") ||
		!strings.Contains(r.err, "rayito: not deleted: the answer was not yes") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if len(w.cfn.requests("DeleteStack")) != 0 {
		t.Fatal("deleted without a yes")
	}

	// "y" deletes it, waits, and says what is retained.
	r = runIn(t, "y\n", "destroy", "events")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	id := "arn:aws:cloudformation:us-east-1:123456789012:stack/rayito-events/1"
	del := w.cfn.requests("DeleteStack")
	if len(del) != 1 || del[0].Form.Get("StackName") != id || !tokenRE.MatchString(del[0].Form.Get("ClientRequestToken")) ||
		len(del[0].Form) != 4 || !del[0].Signed {
		t.Fatalf("DeleteStack %v", del)
	}
	wantOut := "stack rayito-events: deleted\nRetained (DeletionPolicy: Retain); to remove them too:\n" +
		"  AWS::SecretsManager::Secret rayito/events/rayito-events/stack-key:\n" +
		"    aws secretsmanager delete-secret --region us-east-1 --secret-id rayito/events/rayito-events/stack-key --recovery-window-in-days 7\n" +
		"  AWS::DynamoDB::Table rayito-events-EventsTable-ABC:\n" +
		"    aws dynamodb delete-table --region us-east-1 --table-name rayito-events-EventsTable-ABC\n"
	if r.out != wantOut {
		t.Errorf("stdout\n%s\nwant\n%s", r.out, wantOut)
	}
	if !strings.Contains(r.err, "stack rayito-events: DELETE_IN_PROGRESS (") {
		t.Errorf("stderr:\n%s", r.err)
	}

	// Gone: not_found.
	r = w.run("destroy", "events", "--yes")
	if r.code != 1 || !strings.Contains(r.err, "stack rayito-events: not_found") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
}

func TestDestroyYesJSONAndFailure(t *testing.T) {
	w := newWorld(t)
	if r := w.run(w.deployArgs()...); r.code != 0 {
		t.Fatalf("deploy: exit %d: %s", r.code, r.err)
	}
	w.cfn.deleteScript = []string{"DELETE_IN_PROGRESS", "DELETE_FAILED"}
	w.cfn.deleteEvents = []fakeEvent{
		{status: "DELETE_IN_PROGRESS"},
		{logicalID: "DeliveryFailureQueue", status: "DELETE_FAILED", reason: "Access denied for operation 'sqs:DeleteQueue'"},
		{status: "DELETE_FAILED"},
	}
	r := w.run("destroy", "events", "--yes")
	want := "rayito: stack rayito-events: failed: DELETE_FAILED; first failed resource DeliveryFailureQueue: Access denied for operation 'sqs:DeleteQueue'\n"
	if r.code != 1 || !strings.HasSuffix(r.err, want) {
		t.Fatalf("exit %d\nstderr %s\nwant the end %s", r.code, r.err, want)
	}
	w.cfn.with(func() {
		w.cfn.deleteScript = []string{"DELETE_IN_PROGRESS", "DELETE_COMPLETE"}
		w.cfn.deleteEvents = nil
	})
	r = w.run("destroy", "events", "-y", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.out), &out); err != nil || r.code != 0 {
		t.Fatalf("exit %d, %v: %s %s", r.code, err, r.out, r.err)
	}
	if out["status"] != "DELETE_COMPLETE" || out["stack_name"] != "rayito-events" || len(out["retained"].([]any)) != 2 {
		t.Errorf("--json %s", r.out)
	}

	// Timeout: exit 124.
	w2 := newWorld(t)
	if r := w2.run(w2.deployArgs()...); r.code != 0 {
		t.Fatalf("deploy: exit %d: %s", r.code, r.err)
	}
	w2.cfn.with(func() { w2.cfn.deleteScript = []string{"DELETE_IN_PROGRESS"} })
	r = w2.run("destroy", "events", "--yes", "--wait-timeout", "300ms")
	if r.code != 124 || !regexp.MustCompile(`still (DELETE_IN_PROGRESS|in progress) after 300ms \(--wait-timeout\); the deletion goes on`).MatchString(r.err) {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	// A stack being updated is not deleted under it.
	w2.cfn.with(func() {
		w2.cfn.stacks["busy"] = &fakeStack{name: "busy", id: "arn:aws:cloudformation:us-east-1:123456789012:stack/busy/7", status: "UPDATE_IN_PROGRESS"}
	})
	r = w2.run("destroy", "events", "--yes", "--stack-name", "busy")
	if r.code != 1 || !strings.Contains(r.err, "stack busy: blocked: UPDATE_IN_PROGRESS") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	// Nor is a stack made from another template.
	w2.cfn.with(func() {
		w2.cfn.stacks["theirs"] = &fakeStack{name: "theirs", id: "arn:aws:cloudformation:us-east-1:123456789012:stack/theirs/8",
			status: "CREATE_COMPLETE", description: "Someone else's stack"}
	})
	r = w2.run("destroy", "events", "--yes", "--stack-name", "theirs")
	if r.code != 1 || !strings.Contains(r.err, "stack theirs: blocked: CREATE_COMPLETE; it is not an events stack (another template): nothing was deleted") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if n := slices.Index(w2.cfn.actions(), "DeleteStack"); n < 0 || len(w2.cfn.requests("DeleteStack")) != 1 {
		t.Errorf("DeleteStack calls: %v", w2.cfn.actions())
	}
}
