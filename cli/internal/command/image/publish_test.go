package image

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// The build configuration publish sends, field by field, in both Create
// and Update (a PUT sends everything every time). %MEMORY% and the
// optional additionalOsCapabilities vary.
func wantConfig(region, uri string, memory float64, caps bool) map[string]any {
	cfg := map[string]any{
		"baseImageArn":      "arn:aws:lambda:" + region + ":aws:microvm-image:al2023-1",
		"baseImageVersion":  "1",
		"buildRoleArn":      testRole,
		"codeArtifact":      map[string]any{"uri": uri},
		"cpuConfigurations": []any{map[string]any{"architecture": "ARM_64"}},
		"resources":         []any{map[string]any{"minimumMemoryInMiB": memory}},
		"hooks": map[string]any{
			"port": float64(9000),
			"microvmHooks": map[string]any{
				"run": "ENABLED", "runTimeoutInSeconds": float64(30),
				"resume": "ENABLED", "resumeTimeoutInSeconds": float64(30),
				"suspend": "ENABLED", "suspendTimeoutInSeconds": float64(30),
				"terminate": "ENABLED", "terminateTimeoutInSeconds": float64(10),
			},
			"microvmImageHooks": map[string]any{
				"ready": "ENABLED", "readyTimeoutInSeconds": float64(600),
				"validate": "ENABLED", "validateTimeoutInSeconds": float64(600),
			},
		},
	}
	if caps {
		cfg["additionalOsCapabilities"] = []any{"ALL"}
	}
	return cfg
}

// body returns the JSON body of the only request of op, without its
// clientToken (which must be there).
func (w *world) body(op microvms.Operation) map[string]any {
	w.t.Helper()
	var found []map[string]any
	for _, r := range w.mv.Requests() {
		if r.Op != op {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			w.t.Fatalf("%s body: %v", op, err)
		}
		if tok, _ := m["clientToken"].(string); tok == "" {
			w.t.Errorf("%s without a clientToken", op)
		}
		delete(m, "clientToken")
		found = append(found, m)
	}
	if len(found) != 1 {
		w.t.Fatalf("%d %s requests", len(found), op)
	}
	return found[0]
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestPublishCreatesThenUpdates(t *testing.T) {
	w := newWorld(t, 4)
	arn := w.mv.ImageARN("rayito-test")

	r := w.run("publish", "rayito-test", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir)
	if r.code != 0 || r.out != arn+"\n" {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", r.code, r.out, r.err)
	}
	if w.puts() != 1 {
		t.Errorf("%d PUTs to S3, want 1", w.puts())
	}
	// The artifact is the zip `image zip` writes, at its content's key.
	zipPath := filepath.Join(t.TempDir(), "a.zip")
	if _, _, err := writeZip(w.dir, zipPath); err != nil {
		t.Fatal(err)
	}
	sum := sha256File(t, zipPath)
	key := "images/rayito-image-" + sum + ".zip"
	obj, err := w.s3.GetObject(testBucket, key, nil)
	if err != nil {
		t.Fatalf("artifact not at %s: %v", key, err)
	}
	data, _ := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
		t.Error("the uploaded artifact is not the zip")
	}
	// A conditional write (If-None-Match: *) that S3 verifies (the sha256).
	raw, _ := hex.DecodeString(sum)
	if h := w.S3Puts()[0]; h.Get("If-None-Match") != "*" || h.Get("X-Amz-Checksum-Sha256") != base64.StdEncoding.EncodeToString(raw) {
		t.Errorf("PUT headers %v", h)
	}
	if !strings.Contains(r.err, "s3://"+testBucket+"/"+key+": uploaded") {
		t.Errorf("stderr does not say it uploaded:\n%s", r.err)
	}
	// It waited through the build: CREATING, the version building.
	for _, s := range []string{"image rayito-test: CREATING", "IN_PROGRESS"} {
		if !strings.Contains(r.err, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.err)
		}
	}

	uri := "s3://" + testBucket + "/" + key
	create := w.body(microvms.OpCreateMicrovmImage)
	want := wantConfig(microvmstest.DefaultRegion, uri, 2048, false)
	want["name"] = "rayito-test"
	want["tags"] = map[string]any{"rayito:rayd-version": "0.1.0", "rayito:artifact-sha256": sum}
	if !reflect.DeepEqual(create, want) {
		got, _ := json.MarshalIndent(create, "", "  ")
		exp, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("CreateMicrovmImage body\n%s\nwant\n%s", got, exp)
	}

	// Again, same tree, other settings: nothing uploaded, a new version.
	r = w.run("publish", "rayito-test", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir,
		"--memory", "4096", "--os-capabilities", "ALL", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if w.puts() != 1 {
		t.Errorf("%d PUTs to S3 after the second publish, want still 1", w.puts())
	}
	if !strings.Contains(r.err, "already in S3, not uploaded") {
		t.Errorf("stderr:\n%s", r.err)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.out), &out); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.out)
	}
	wantOut := map[string]any{
		"arn": arn, "version": "2", "state": "UPDATED", "version_state": "SUCCESSFUL", "status": "ACTIVE",
		"artifact": map[string]any{"bucket": testBucket, "key": key, "sha256": sum, "uploaded": false},
	}
	if !reflect.DeepEqual(out, wantOut) {
		t.Errorf("--json\n%s\nwant %v", r.out, wantOut)
	}
	update := w.body(microvms.OpUpdateMicrovmImage)
	if want := wantConfig(microvmstest.DefaultRegion, uri, 4096, true); !reflect.DeepEqual(update, want) {
		got, _ := json.MarshalIndent(update, "", "  ")
		t.Errorf("UpdateMicrovmImage body\n%s\nwant %v", got, want)
	}
	var tagged bool
	for _, rq := range w.mv.Requests() {
		if rq.Op == microvms.OpTagResource {
			tagged = strings.Contains(string(rq.Body), `"rayito:rayd-version":"0.1.0"`) && strings.Contains(string(rq.Body), sum)
		}
	}
	if !tagged {
		t.Error("the updated image was not tagged")
	}
	for _, rq := range w.mv.Requests() {
		if !rq.Signed {
			t.Errorf("%s %s was not signed", rq.Method, rq.Path)
		}
	}
}

// Without s3:ListBucket a HEAD of a missing key is a 403: publish then
// relies on the conditional PUT, which S3 refuses (412) when the object is
// there, and does not count that as an upload.
func TestPublishHeadForbidden(t *testing.T) {
	w := newWorld(t, 2)
	w.SetHeadForbidden(true)
	args := []string{"publish", "rayito-h", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir, "--json"}
	r := w.run(args...)
	if r.code != 0 || !strings.Contains(r.out, `"uploaded": true`) {
		t.Fatalf("exit %d: %s %s", r.code, r.out, r.err)
	}
	r = w.run(args...)
	if r.code != 0 || !strings.Contains(r.out, `"uploaded": false`) || w.puts() != 2 {
		t.Fatalf("exit %d, %d PUTs: %s %s", r.code, w.puts(), r.out, r.err)
	}
}

func TestPublishZip(t *testing.T) {
	w := newWorld(t, 2)
	zipPath := filepath.Join(t.TempDir(), "a.zip")
	if _, _, err := writeZip(w.dir, zipPath); err != nil {
		t.Fatal(err)
	}
	r := w.run("publish", "rayito-zip", "--bucket", testBucket, "--prefix", "/custom/p/", "--build-role", testRole, "--zip", zipPath, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if want := `"key": "custom/p/rayito-image-` + sha256File(t, zipPath) + `.zip"`; !strings.Contains(r.out, want) {
		t.Errorf("stdout lacks %s:\n%s", want, r.out)
	}
	if !strings.Contains(r.out, `"uploaded": true`) {
		t.Errorf("stdout:\n%s", r.out)
	}

	// Not a zip, or a zip without a Dockerfile: usage errors, nothing sent.
	before := len(w.mv.Requests())
	bad := filepath.Join(t.TempDir(), "bad.zip")
	os.WriteFile(bad, []byte("not a zip"), 0o644)
	r = w.run("publish", "rayito-zip", "--bucket", testBucket, "--build-role", testRole, "--zip", bad)
	if r.code != 2 || !strings.Contains(r.err, "not a zip archive") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	for name, entries := range map[string][]string{"no-dockerfile.zip": {"bin/rayd"}, "climbs.zip": {"Dockerfile", "../escape"}} {
		var zb bytes.Buffer
		zw := zip.NewWriter(&zb)
		for _, e := range entries {
			fw, _ := zw.Create(e)
			fw.Write([]byte("x"))
		}
		zw.Close()
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, zb.Bytes(), 0o644)
		if r := w.run("publish", "rayito-zip", "--bucket", testBucket, "--build-role", testRole, "--zip", p); r.code != 2 || !strings.Contains(r.err, "--zip") {
			t.Errorf("%s: exit %d: %s", name, r.code, r.err)
		}
	}
	if len(w.mv.Requests()) != before {
		t.Error("a bad --zip reached the service")
	}
}

func TestPublishFailedBuild(t *testing.T) {
	w := newWorld(t, 2)
	w.mv.FailBuilds(1)
	r := w.run("publish", "rayito-bad", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir)
	if r.code != 1 || r.out != "" {
		t.Fatalf("exit %d, stdout %q", r.code, r.out)
	}
	if !strings.Contains(r.err, "rayito: image rayito-bad version 1 failed to build (image CREATE_FAILED, version FAILED); build id build-") {
		t.Errorf("stderr:\n%s", r.err)
	}
	// The service's own words (stateReason) are never printed.
	if strings.Contains(r.err, "hook") {
		t.Errorf("the build's stateReason leaked:\n%s", r.err)
	}
}

func TestPublishConflict(t *testing.T) {
	w := newWorld(t, 2)
	w.mv.AddImage("rayito-busy")
	w.mv.Fail(microvms.OpUpdateMicrovmImage, 1, 409, "ConflictException", "")
	r := w.run("publish", "rayito-busy", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir)
	if r.code != 1 || !strings.Contains(r.err, "rayito: a build of image rayito-busy is in progress: wait for it to end") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
}

// An image a stack manages (rayito:managed-by=rayito-cdk) is refused
// before anything is uploaded.
func TestPublishManagedByStack(t *testing.T) {
	w := newWorld(t, 2)
	arn := w.mv.AddImage("rayito-cdk")
	if err := w.client().TagResource(context.Background(), arn, map[string]string{TagManagedBy: "rayito-cdk"}); err != nil {
		t.Fatal(err)
	}
	r := w.run("publish", "rayito-cdk", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir)
	if r.code != 1 || !strings.Contains(r.err, "image rayito-cdk is managed by rayito-cdk (its rayito:managed-by tag): publish it through that stack") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if w.puts() != 0 || len(w.S3Requests()) != 0 {
		t.Errorf("S3 requests: %v", w.S3Requests())
	}
	for _, op := range w.ops() {
		if op == string(microvms.OpUpdateMicrovmImage) {
			t.Error("updated a managed image")
		}
	}
}

// A refused build names the quotas and how to make room.
func TestPublishQuota(t *testing.T) {
	w := newWorld(t, 2)
	w.mv.AddImage("rayito-q")
	w.mv.Fail(microvms.OpUpdateMicrovmImage, 1, 402, "ServiceQuotaExceededException", "")
	r := w.run("publish", "rayito-q", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir)
	if r.code != 1 || !strings.Contains(r.err, "50 versions an image") || !strings.Contains(r.err, "'rayito image prune rayito-q --keep N'") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
}

// Every mistake on the command line is exit 2 before anything is built,
// uploaded or asked.
func TestPublishUsage(t *testing.T) {
	w := newWorld(t, 2)
	base := []string{"publish", "rayito-x", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(base, "--memory", "1000"), "--memory 1000: must be one of 512, 1024, 2048, 4096, 8192 (MiB)"},
		{append(base, "--memory", "16384"), "--memory 16384"},
		{append(base, "--os-capabilities", "SOME"), `--os-capabilities "SOME": the only value is ALL`},
		{append(base, "--zip", "x.zip"), "--zip and --dir exclude each other"},
		{append(base, "--wait-timeout", "0s"), "--wait-timeout must be positive"},
		{append(base, "--base-image-version", "latest"), "--base-image-version"},
		{append(base, "--prefix", "a/../b"), "--prefix"},
		{[]string{"publish", "rayito-x", "--bucket", testBucket, "--dir", w.dir}, "--build-role is required"},
		{[]string{"publish", "rayito-x", "--bucket", testBucket, "--build-role", "role/x"}, "is not an IAM role ARN"},
		{[]string{"publish", "rayito-x", "--build-role", testRole}, "--bucket is required (or set RAYITO_ARTIFACT_BUCKET)"},
		{[]string{"publish", "rayito-x", "--bucket", "Bad_Bucket", "--build-role", testRole}, "is not an S3 bucket name"},
		{[]string{"publish", "bad name", "--bucket", testBucket, "--build-role", testRole}, `image name "bad name"`},
		{[]string{"publish", "--bucket", testBucket, "--build-role", testRole}, "publish takes one argument"},
		{[]string{"publish", "rayito-x", "--bucket", testBucket, "--build-role", testRole, "--dir", "/nonexistent"}, "no such directory"},
	} {
		r := w.run(c.args...)
		if r.code != 2 || !strings.Contains(r.err, c.want) || r.out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, r.code, r.out, r.err, c.want)
		}
	}
	if n := len(w.mv.Requests()); n != 0 {
		t.Errorf("%d control-plane requests: %v", n, w.ops())
	}
	if len(w.S3Requests()) != 0 {
		t.Errorf("S3 requests: %v", w.S3Requests())
	}
}

// --bucket defaults to RAYITO_ARTIFACT_BUCKET.
func TestPublishBucketFromEnvironment(t *testing.T) {
	w := newWorld(t, 2)
	r := run(t, map[string]string{ArtifactBucketEnv: testBucket}, "publish", "rayito-env", "--build-role", testRole, "--dir", w.dir, "--json")
	if r.code != 0 || !strings.Contains(r.out, `"bucket": "`+testBucket+`"`) {
		t.Fatalf("exit %d: %s %s", r.code, r.out, r.err)
	}
	r = run(t, map[string]string{ArtifactBucketEnv: "not a bucket"}, "publish", "rayito-env", "--build-role", testRole, "--dir", w.dir)
	if r.code != 2 || !strings.Contains(r.err, "RAYITO_ARTIFACT_BUCKET is not an S3 bucket name") || strings.Contains(r.err, "not a bucket") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
}

// A bucket that does not exist: a failure naming it, with S3's code and
// status only.
func TestPublishNoBucket(t *testing.T) {
	w := newWorld(t, 2)
	r := w.run("publish", "rayito-x", "--bucket", "no-such-bucket", "--build-role", testRole, "--dir", w.dir)
	if r.code != 1 || !strings.Contains(r.err, "no-such-bucket") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if strings.Contains(r.err, "api error") || strings.Contains(r.err, "RequestID") {
		t.Errorf("raw AWS error: %s", r.err)
	}
}

func TestPublishWaitTimeout(t *testing.T) {
	w := newWorld(t, 1000)
	r := w.run("publish", "rayito-slow", "--bucket", testBucket, "--build-role", testRole, "--dir", w.dir, "--wait-timeout", "50ms")
	if r.code != 124 || !strings.Contains(r.err, "still not launchable after 50ms (--wait-timeout); the build goes on") {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
}

func TestKey(t *testing.T) {
	a := &Artifact{sha256: strings.Repeat("ab", 32)}
	if got := a.key(DefaultPrefix); got != "images/rayito-image-"+a.sha256+".zip" {
		t.Error(got)
	}
	if got := a.key(""); got != "rayito-image-"+a.sha256+".zip" {
		t.Error(got)
	}
}
