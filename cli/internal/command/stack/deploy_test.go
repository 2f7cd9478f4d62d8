package stack

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	evstack "github.com/rayito-dev/rayito/events/stack"
)

var tokenRE = regexp.MustCompile(`^rayito-[0-9a-f]{32}$`)

// wantForm is the exact form of a CreateStack or UpdateStack: every
// parameter of the template, the embedded template as it is, the
// capabilities it needs, and a fresh token.
func wantForm(t *testing.T, got cfnRequest, action, codePrefix string, params map[string]string) {
	t.Helper()
	f := got.Form
	if tok := f.Get("ClientRequestToken"); !tokenRE.MatchString(tok) {
		t.Errorf("%s ClientRequestToken %q", action, tok)
	}
	want := map[string]string{
		"Action": action, "Version": "2010-05-15", "StackName": "rayito-events",
		"TemplateBody":          string(evstack.Template),
		"Capabilities.member.1": "CAPABILITY_IAM",
		"ClientRequestToken":    f.Get("ClientRequestToken"),
	}
	for i, k := range []string{"ImageLogGroupName", "CodeBucket", "CodePrefix", "ReconcileMinutes", "LogRetentionDays"} {
		n := fmt.Sprintf("Parameters.member.%d.", i+1)
		want[n+"ParameterKey"] = k
		switch v := params[k]; v {
		case "previous":
			want[n+"UsePreviousValue"] = "true"
		default:
			want[n+"ParameterValue"] = v
		}
	}
	gotFlat := map[string]string{}
	for k, v := range f {
		if len(v) != 1 {
			t.Errorf("%s: %s sent %d times", action, k, len(v))
		}
		gotFlat[k] = v[0]
	}
	if !reflect.DeepEqual(gotFlat, want) {
		for k := range want {
			if gotFlat[k] != want[k] {
				t.Errorf("%s %s = %.80q, want %.80q", action, k, gotFlat[k], want[k])
			}
		}
		for k := range gotFlat {
			if _, ok := want[k]; !ok {
				t.Errorf("%s sent %s = %q, not expected", action, k, gotFlat[k])
			}
		}
	}
	if !got.Signed {
		t.Errorf("%s not signed", action)
	}
}

// codeOf returns the zips deploy builds from dist and the CodePrefix
// they go under.
func codeOf(t *testing.T, dist string) ([]lambdaZip, string) {
	t.Helper()
	zips, sum, err := packAll(dist)
	if err != nil {
		t.Fatal(err)
	}
	return zips, DefaultPrefix + sum + "/"
}

func TestDeployCreatesThenUpdates(t *testing.T) {
	w := newWorld(t)
	r := w.run(w.deployArgs()...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.out, r.err)
	}
	zips, codePrefix := codeOf(t, w.dist)
	if got, want := w.cfn.actions(), []string{"DescribeStacks", "CreateStack", "DescribeStacks", "DescribeStacks"}; !slices.Equal(got, want) {
		t.Errorf("CloudFormation calls %v, want %v", got, want)
	}
	wantForm(t, w.cfn.requests("CreateStack")[0], "CreateStack", codePrefix, map[string]string{
		"ImageLogGroupName": testLogGroup, "CodeBucket": testBucket, "CodePrefix": codePrefix,
		"ReconcileMinutes": "5", "LogRetentionDays": "30",
	})
	// The three zips, each at <CodePrefix><function>.zip, written
	// conditionally with the sha256 for S3 to check.
	if w.puts() != 3 {
		t.Fatalf("%d S3 PUTs, want 3", w.puts())
	}
	for i, z := range zips {
		key := codePrefix + z.function + ".zip"
		obj, err := w.s3.GetObject(testBucket, key, nil)
		if err != nil {
			t.Fatalf("no %s: %v", key, err)
		}
		data, _ := io.ReadAll(obj.Contents)
		obj.Contents.Close()
		if !bytes.Equal(data, z.data) {
			t.Errorf("%s is not the zip", key)
		}
		raw, _ := hex.DecodeString(z.sha256)
		if h := w.s3Put[i]; h.Get("If-None-Match") != "*" || h.Get("X-Amz-Checksum-Sha256") != base64.StdEncoding.EncodeToString(raw) {
			t.Errorf("PUT %s headers %v", key, h)
		}
		if !strings.Contains(r.err, z.function+": uploaded s3://"+testBucket+"/"+key) {
			t.Errorf("stderr does not say %s was uploaded:\n%s", z.function, r.err)
		}
	}
	// HeadObject, then the conditional PutObject, one zip after the other.
	var wantS3 []string
	for _, z := range zips {
		p := "/" + testBucket + "/" + codePrefix + z.function + ".zip"
		wantS3 = append(wantS3, "HEAD "+p, "PUT "+p)
	}
	if !slices.Equal(w.s3Req, wantS3) {
		t.Errorf("S3 requests %v, want %v", w.s3Req, wantS3)
	}
	for _, s := range []string{"stack rayito-events: creating\n", "stack rayito-events: CREATE_IN_PROGRESS (", "stack rayito-events: CREATE_COMPLETE\n"} {
		if !strings.Contains(r.err, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.err)
		}
	}
	wantOut := "EventsTableName    rayito-events-EventsTable-ABC\n" +
		"StackKeySecretArn  arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/events/rayito-events/stack-key-xyz\n"
	if r.out != wantOut {
		t.Errorf("stdout\n%s\nwant\n%s", r.out, wantOut)
	}

	// Again, one setting changed: nothing uploaded, an update that keeps
	// the retention the stack has.
	r = w.run(w.deployArgs("--reconcile-minutes", "10", "--json")...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr %s", r.code, r.err)
	}
	if w.puts() != 3 {
		t.Errorf("%d S3 PUTs after the second deploy, want still 3", w.puts())
	}
	if len(w.s3Req) != 9 || !strings.HasPrefix(w.s3Req[6], "HEAD ") || !strings.HasPrefix(w.s3Req[8], "HEAD ") {
		t.Errorf("S3 requests of the second deploy %v, want three HEADs", w.s3Req[6:])
	}
	if strings.Count(r.err, "already in S3, not uploaded") != 3 {
		t.Errorf("stderr:\n%s", r.err)
	}
	wantForm(t, w.cfn.requests("UpdateStack")[0], "UpdateStack", codePrefix, map[string]string{
		"ImageLogGroupName": testLogGroup, "CodeBucket": testBucket, "CodePrefix": codePrefix,
		"ReconcileMinutes": "10", "LogRetentionDays": "previous",
	})
	var out map[string]any
	if err := json.Unmarshal([]byte(r.out), &out); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.out)
	}
	var zipsOut []any
	for _, z := range zips {
		zipsOut = append(zipsOut, map[string]any{"function": z.function, "artifact": "rayito-events-" + z.function + "-0.1.0-linux-arm64",
			"key": codePrefix + z.function + ".zip", "sha256": z.sha256, "bytes": float64(len(z.data)), "uploaded": false})
	}
	want := map[string]any{
		"stack_name": "rayito-events", "stack_id": "arn:aws:cloudformation:us-east-1:123456789012:stack/rayito-events/1",
		"region": testRegion, "action": "update", "status": "UPDATE_COMPLETE",
		"code": map[string]any{"bucket": testBucket, "prefix": codePrefix, "sha256": strings.TrimSuffix(strings.TrimPrefix(codePrefix, DefaultPrefix), "/"), "zips": zipsOut},
		"outputs": map[string]any{
			"EventsTableName":   "rayito-events-EventsTable-ABC",
			"StackKeySecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/events/rayito-events/stack-key-xyz",
		},
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("--json\n%s\nwant %v", r.out, want)
	}
	for _, rq := range w.cfn.requests("") {
		if !rq.Signed {
			t.Errorf("%s not signed", rq.action())
		}
	}
}

// Without s3:ListBucket a HEAD of a missing key is a 403: deploy then
// relies on the conditional PUT, which S3 refuses (412) when the object
// is there, and does not count that as an upload.
func TestDeployHeadForbidden(t *testing.T) {
	w := newWorld(t)
	w.headForbidden = true
	r := w.run(w.deployArgs("--json")...)
	if r.code != 0 || strings.Count(r.out, `"uploaded": true`) != 3 {
		t.Fatalf("exit %d: %s %s", r.code, r.out, r.err)
	}
	r = w.run(w.deployArgs("--json")...)
	if r.code != 0 || strings.Count(r.out, `"uploaded": false`) != 3 || w.puts() != 6 {
		t.Fatalf("exit %d, %d PUTs: %s %s", r.code, w.puts(), r.out, r.err)
	}
}

// "No updates are to be performed" is a deploy that had nothing to do.
func TestDeployNoUpdates(t *testing.T) {
	w := newWorld(t)
	if r := w.run(w.deployArgs()...); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	w.cfn.noUpdates = true
	r := w.run(w.deployArgs("--json")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if !strings.Contains(r.err, "stack rayito-events: no changes, CREATE_COMPLETE") || !strings.Contains(r.out, `"action": "none"`) ||
		!strings.Contains(r.out, `"status": "CREATE_COMPLETE"`) || !strings.Contains(r.out, `"EventsTableName": "rayito-events-EventsTable-ABC"`) {
		t.Errorf("stdout %s\nstderr %s", r.out, r.err)
	}
	want := []string{"DescribeStacks", "CreateStack", "DescribeStacks", "DescribeStacks", "DescribeStacks", "UpdateStack"}
	if got := w.cfn.actions(); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// A creation that fails and rolls back: exit 1 naming the status and the
// first failed resource (never a parameter); a second deploy is refused
// before anything is uploaded.
func TestDeployRollback(t *testing.T) {
	w := newWorld(t)
	w.cfn.createScript = []string{"CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE"}
	w.cfn.createEvents = []fakeEvent{
		{status: "CREATE_IN_PROGRESS", reason: "User Initiated"},
		{logicalID: "EventsTable", status: "CREATE_COMPLETE"},
		{logicalID: "ForwarderFunction", status: "CREATE_FAILED", reason: "Resource handler returned message: \"Error occurred while GetObject.\nS3 Error Code: NoSuchKey\""},
		{logicalID: "DelivererFunction", status: "CREATE_FAILED", reason: "Resource creation cancelled"},
		{status: "ROLLBACK_IN_PROGRESS", reason: "The following resource(s) failed to create: [ForwarderFunction, DelivererFunction]."},
		{logicalID: "EventsTable", status: "DELETE_SKIPPED"},
		{status: "ROLLBACK_COMPLETE"},
	}
	r := w.run(w.deployArgs()...)
	want := "rayito: stack rayito-events: failed: ROLLBACK_COMPLETE; first failed resource ForwarderFunction: " +
		"Resource handler returned message: \"Error occurred while GetObject. S3 Error Code: NoSuchKey\"; the stack cannot be updated: " +
		"fix the cause, run 'rayito stack destroy events --stack-name rayito-events', then deploy again\n"
	if r.code != 1 || !strings.HasSuffix(r.err, want) || r.out != "" {
		t.Fatalf("exit %d\nstdout %q\nstderr %s\nwant the end %s", r.code, r.out, r.err, want)
	}
	if strings.Contains(r.err, testLogGroup) {
		t.Errorf("a parameter's value on stderr:\n%s", r.err)
	}
	puts := w.puts()
	r = w.run(w.deployArgs()...)
	if r.code != 1 || !strings.Contains(r.err, "rayito: stack rayito-events: blocked: ROLLBACK_COMPLETE; its creation failed") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if w.puts() != puts || len(w.cfn.requests("CreateStack")) != 1 || len(w.cfn.requests("UpdateStack")) != 0 {
		t.Errorf("the refused deploy wrote: %d PUTs, calls %v", w.puts()-puts, w.cfn.actions())
	}
}

// An update that rolls back names the resource that failed in it, not
// one of an earlier operation (events are filtered by the token).
func TestDeployUpdateRollback(t *testing.T) {
	w := newWorld(t)
	w.cfn.createEvents = []fakeEvent{{logicalID: "OldResource", status: "CREATE_FAILED", reason: "an older operation's"}}
	if r := w.run(w.deployArgs()...); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	w.cfn.updateScript = []string{"UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE"}
	w.cfn.updateEvents = []fakeEvent{
		{status: "UPDATE_IN_PROGRESS"},
		{logicalID: "ReconcilerSchedule", status: "UPDATE_FAILED", reason: "Invalid request provided: schedule"},
		{status: "UPDATE_ROLLBACK_IN_PROGRESS"},
		{status: "UPDATE_ROLLBACK_COMPLETE"},
	}
	r := w.run(w.deployArgs("--log-retention-days", "7")...)
	want := "rayito: stack rayito-events: failed: UPDATE_ROLLBACK_COMPLETE; first failed resource ReconcilerSchedule: Invalid request provided: schedule\n"
	if r.code != 1 || !strings.HasSuffix(r.err, want) {
		t.Fatalf("exit %d\nstderr %s\nwant the end %s", r.code, r.err, want)
	}
}

// Past --wait-timeout: exit 124, the operation going on.
func TestDeployTimeout(t *testing.T) {
	w := newWorld(t)
	w.cfn.createScript = []string{"CREATE_IN_PROGRESS"} // for ever
	r := w.run(w.deployArgs("--wait-timeout", "300ms")...)
	// "in progress" when the machine is so slow that not even one
	// DescribeStacks answered within the 300 ms.
	want := regexp.MustCompile(`rayito: stack rayito-events: still (CREATE_IN_PROGRESS|in progress) after 300ms \(--wait-timeout\); ` +
		`the create goes on: see 'rayito stack status events --stack-name rayito-events'\n$`)
	if r.code != 124 || !want.MatchString(r.err) {
		t.Fatalf("exit %d\nstderr %s\nwant the end %s", r.code, r.err, want)
	}
	if n := len(w.cfn.requests("DescribeStacks")); n < 3 {
		t.Errorf("%d DescribeStacks: it did not poll", n)
	}
}

// A stack with an operation in progress, or that is not an events stack,
// is refused before anything is uploaded.
func TestDeployRefuses(t *testing.T) {
	for _, tc := range []struct {
		status, description, want string
	}{
		{"UPDATE_IN_PROGRESS", evstack.DescriptionPrefix, "rayito: stack rayito-events: blocked: UPDATE_IN_PROGRESS; an operation is in progress"},
		{"REVIEW_IN_PROGRESS", evstack.DescriptionPrefix, "rayito: stack rayito-events: blocked: REVIEW_IN_PROGRESS; an operation is in progress"},
		{"UPDATE_ROLLBACK_FAILED", evstack.DescriptionPrefix, "blocked: UPDATE_ROLLBACK_FAILED; continue its rollback first"},
		{"CREATE_COMPLETE", "Someone else's stack", "rayito: stack rayito-events: blocked: CREATE_COMPLETE; it is not an events stack"},
	} {
		t.Run(tc.status, func(t *testing.T) {
			w := newWorld(t)
			w.cfn.stacks["rayito-events"] = &fakeStack{name: "rayito-events", id: "arn:aws:cloudformation:us-east-1:123456789012:stack/rayito-events/9",
				status: tc.status, description: tc.description}
			r := w.run(w.deployArgs()...)
			if r.code != 1 || !strings.Contains(r.err, tc.want) {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if len(w.s3Req) != 0 || !slices.Equal(w.cfn.actions(), []string{"DescribeStacks"}) {
				t.Errorf("S3 %v, CloudFormation %v: want one DescribeStacks and nothing else", w.s3Req, w.cfn.actions())
			}
		})
	}
}

// The functions' binaries: exactly one of each, arm64, else a usage
// error naming what is wrong, before any AWS call.
func TestDeployArtifacts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		want  string
	}{
		{"missing", func(w *world) { os.Remove(filepath.Join(w.dist, "rayito-events-deliverer-0.1.0-linux-arm64")) },
			"rayito: no rayito-events-deliverer-*-linux-arm64 in DIST: build them with `make dist COMPONENTS=events`, or give --artifacts\n"},
		{"ambiguous", func(w *world) {
			writeFile(t, filepath.Join(w.dist, "rayito-events-reconciler-0.2.0-linux-arm64"), elfARM64("x"), 0o755)
		}, "rayito: 2 files match rayito-events-reconciler-*-linux-arm64 in DIST (rayito-events-reconciler-0.1.0-linux-arm64, rayito-events-reconciler-0.2.0-linux-arm64): keep one\n"},
		{"amd64", func(w *world) {
			writeFile(t, filepath.Join(w.dist, "rayito-events-forwarder-0.1.0-linux-arm64"), elfAMD64(), 0o755)
		}, "rayito: DIST/rayito-events-forwarder-0.1.0-linux-arm64: a EM_X86_64 ET_EXEC, not a linux arm64 executable\n"},
		{"not elf", func(w *world) {
			writeFile(t, filepath.Join(w.dist, "rayito-events-forwarder-0.1.0-linux-arm64"), []byte("#!/bin/sh\n"), 0o755)
		}, "rayito: DIST/rayito-events-forwarder-0.1.0-linux-arm64: not an ELF executable\n"},
		{"no dir", func(w *world) { os.RemoveAll(w.dist) },
			"rayito: --artifacts DIST: no such directory (build it with `make dist COMPONENTS=events`)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(w)
			r := w.run(w.deployArgs()...)
			got := strings.ReplaceAll(r.err, w.dist, "DIST")
			if r.code != 2 || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("exit %d\nstderr %s\nwant %s", r.code, got, tc.want)
			}
			if len(w.s3Req) != 0 || len(w.cfn.requests("")) != 0 {
				t.Errorf("AWS was called: S3 %v, CloudFormation %v", w.s3Req, w.cfn.actions())
			}
		})
	}
}

// Command-line mistakes: exit 2, nothing read or sent.
func TestDeployUsage(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy", "events", "--log-group", testLogGroup}, "rayito: --bucket is required"},
		{[]string{"deploy", "events", "--bucket", testBucket}, "rayito: --log-group is required"},
		{[]string{"deploy", "events", "--bucket", "Bad_Bucket", "--log-group", testLogGroup}, `rayito: --bucket "Bad_Bucket" is not an S3 bucket name`},
		{w.deployArgs("--log-group", "no spaces"), `rayito: --log-group "no spaces" is not a log group name`},
		{w.deployArgs("--reconcile-minutes", "1"), "rayito: --reconcile-minutes 1: from 2 to 60"},
		{w.deployArgs("--log-retention-days", "2"), "rayito: --log-retention-days 2: one of 1, 3, 5, 7, 14, 30, 60, 90, 180, 365"},
		{w.deployArgs("--prefix", "a/../b"), `rayito: --prefix "a/../b": use letters`},
		{w.deployArgs("--stack-name", "1abc"), `rayito: --stack-name "1abc": a letter, then`},
		{w.deployArgs("--stack-name", strings.Repeat("a", 54)), "at most 53 characters"},
		{w.deployArgs("--wait-timeout", "0s"), "rayito: --wait-timeout must be positive"},
		{append(w.deployArgs(), "extra"), `rayito: rayito stack deploy events takes no arguments (got "extra")`},
	} {
		r := w.run(tc.args...)
		if r.code != 2 || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr %s; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
	}
	if len(w.s3Req) != 0 || len(w.cfn.requests("")) != 0 {
		t.Errorf("AWS was called: S3 %v, CloudFormation %v", w.s3Req, w.cfn.actions())
	}
}

// The same binary gives the same zip, byte for byte: one entry,
// bootstrap, 0755, the binary.
func TestPackZipDeterministic(t *testing.T) {
	bin := elfARM64("forwarder")
	a, err := packZip(bin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := packZip(bytes.Clone(bin))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two zips of one binary differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" || zr.File[0].Mode() != 0o755 || !zr.File[0].Modified.Equal(zipTime) {
		t.Fatalf("entries %+v", zr.File)
	}
	rc, _ := zr.File[0].Open()
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, bin) {
		t.Error("bootstrap is not the binary")
	}
	// Another build, another key: the code's sha256 covers every zip.
	w := newWorld(t)
	_, p1 := codeOf(t, w.dist)
	_, p2 := codeOf(t, w.dist)
	writeFile(t, filepath.Join(w.dist, "rayito-events-reconciler-0.1.0-linux-arm64"), elfARM64("reconciler v2"), 0o755)
	_, p3 := codeOf(t, w.dist)
	if p1 != p2 || p1 == p3 {
		t.Errorf("code prefixes %s %s %s", p1, p2, p3)
	}
	sum := sha256.Sum256(a)
	if len(hex.EncodeToString(sum[:])) != 64 {
		t.Fatal("sha256")
	}
}
