package template

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	imagecmd "github.com/rayito-dev/rayito/cli/internal/command/image"
	"github.com/rayito-dev/rayito/cli/internal/command/image/imagetest"
	build "github.com/rayito-dev/rayito/cli/internal/image"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// The image's Dockerfile template in these tests: rayd's ENTRYPOINT and
// CMD at the end, as image/Dockerfile.in has them.
const testBase = "FROM public.ecr.aws/lambda/microvms:al2023-minimal@sha256:@@BASE_DIGEST@@\n" +
	"COPY a.txt /a.txt\n" +
	"EXPOSE 9000 8080\n" +
	"\n" +
	"# rayd is PID 1.\n" +
	"ENTRYPOINT [\"/usr/local/bin/rayd\"]\n" +
	"CMD [\"-egress=on\"]\n"

const testDockerfile = "FROM rayito\n" +
	"RUN apt-get install -y cowsay\n" +
	"COPY app /home/user/app\n" +
	"ENV GREETING=hello\n" +
	"WORKDIR /home/user/app\n" +
	"USER user\n" +
	"CMD python3 -m http.server 8000\n"

// awsWorld is the fake AWS with an image tree and a template context.
type awsWorld struct {
	*imagetest.World
	t   *testing.T
	ctx string // the template's context (its Dockerfile inside)
}

func newAWSWorld(t *testing.T, polls int) *awsWorld {
	w := &awsWorld{World: imagetest.New(t, polls), t: t, ctx: filepath.Join(t.TempDir(), "tpl")}
	t.Cleanup(imagecmd.SetPolling(time.Millisecond, 4*time.Millisecond))
	imagetest.WriteTree(t, w.Dir, map[string]string{"Dockerfile.in": testBase})
	imagetest.WriteTree(t, w.ctx, map[string]string{
		"Dockerfile":      testDockerfile,
		"app/main.py":     "print('hi')\n",
		"app/lib/util.py": "X = 1\n",
		"unused.txt":      "not copied\n",
	})
	return w
}

type result = imagetest.Result

// run runs `rayito template ARGS...` in process with RAYITO_BACKEND=aws
// (unless env says otherwise).
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return imagetest.Run(t, Command, func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "RAYITO_BACKEND" {
			return "aws"
		}
		return ""
	}, args...)
}

func (w *awsWorld) build(name string, extra ...string) result {
	w.t.Helper()
	args := append([]string{"build", name, "-f", filepath.Join(w.ctx, "Dockerfile"), "--bucket", imagetest.Bucket,
		"--build-role", imagetest.Role, "--image-dir", w.Dir}, extra...)
	return run(w.t, nil, args...)
}

func (w *awsWorld) count(op microvms.Operation) int {
	n := 0
	for _, r := range w.MV.Requests() {
		if r.Op == op {
			n++
		}
	}
	return n
}

// bodyOf is the JSON body of the last request of op.
func (w *awsWorld) bodyOf(op microvms.Operation) map[string]any {
	w.t.Helper()
	var m map[string]any
	for _, r := range w.MV.Requests() {
		if r.Op == op {
			m = nil
			if err := json.Unmarshal(r.Body, &m); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	if m == nil {
		w.t.Fatalf("no %s request", op)
	}
	return m
}

// object reads an uploaded artifact as a zip: name -> contents.
func (w *awsWorld) object(key string) map[string]string {
	w.t.Helper()
	obj, err := w.S3.GetObject(imagetest.Bucket, key, nil)
	if err != nil {
		w.t.Fatalf("no object %s: %v", key, err)
	}
	data, _ := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		w.t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			w.t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
	}
	return files
}

func TestAWSBuild(t *testing.T) {
	w := newAWSWorld(t, 3)
	r := w.build("web", "--json")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
	var out awsBuildJSON
	if err := json.Unmarshal([]byte(r.Out), &out); err != nil {
		t.Fatalf("stdout: %v\n%s", err, r.Out)
	}
	arn := w.MV.ImageARN("web")
	wantKey := "images/rayito-image-" + out.SHA256 + ".zip"
	if out.State != "READY" || out.ImageARN != arn || out.Version != "1" || out.Key != wantKey || !out.Uploaded || out.Unchanged || out.Reason != "" {
		t.Errorf("--json: %+v", out)
	}

	// The merged artifact: the image's tree, the template's layer before
	// ENTRYPOINT, its context under template/context, its runtime
	// configuration.
	files := w.object(wantKey)
	wantDockerfile := "FROM public.ecr.aws/lambda/microvms:al2023-minimal@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n" +
		"COPY a.txt /a.txt\n" +
		"EXPOSE 9000 8080\n" +
		"\n" +
		"RUN [\"/bin/sh\", \"-c\", \"apt-get install -y cowsay\"]\n" +
		"COPY [\"template/context/app\",\"/home/user/app\"]\n" +
		"ENV GREETING=\"hello\"\n" +
		"WORKDIR /home/user/app\n" +
		"USER user\n" +
		"# rayito start (run by the platform when a sandbox starts; not an instruction): {\"cmd\":\"python3 -m http.server 8000\"}\n" +
		"# The template's runtime configuration (defaults and start command), read by rayd.\n" +
		"COPY [\"template/runtime.json\",\"/etc/rayito/template.json\"]\n" +
		"# rayd runs as root from /: the template's user and directory are its sandboxes' defaults.\n" +
		"USER root\n" +
		"WORKDIR /\n" +
		"\n" +
		"# rayd is PID 1.\n" +
		"ENTRYPOINT [\"/usr/local/bin/rayd\"]\n" +
		"CMD [\"-egress=on\"]\n"
	if files["Dockerfile"] != wantDockerfile {
		t.Errorf("Dockerfile\n%s\nwant\n%s", files["Dockerfile"], wantDockerfile)
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	wantNames := []string{"Dockerfile", "a.txt", "requirements.lock", "template/", "template/context/", "template/context/app/",
		"template/context/app/lib/", "template/context/app/lib/util.py", "template/context/app/main.py", "template/runtime.json"}
	if strings.Join(sorted(names), " ") != strings.Join(wantNames, " ") {
		t.Errorf("entries %v\nwant %v", sorted(names), wantNames)
	}
	if files["template/context/app/main.py"] != "print('hi')\n" {
		t.Errorf("main.py %q", files["template/context/app/main.py"])
	}
	rt, err := ptemplate.DecodeRuntime([]byte(files["template/runtime.json"]))
	if err != nil {
		t.Fatal(err)
	}
	want := &ptemplate.Runtime{V: 1, Name: "web", Envs: map[string]string{"GREETING": "hello"}, Workdir: "/home/user/app", User: "user",
		Start: &ptemplate.Start{Cmd: "python3 -m http.server 8000"}}
	if !reflect.DeepEqual(rt, want) {
		t.Errorf("runtime %+v, want %+v", rt, want)
	}

	// The wire: the artifact's URI, the template's tags.
	create := w.bodyOf(microvms.OpCreateMicrovmImage)
	if uri := create["codeArtifact"].(map[string]any)["uri"]; uri != "s3://"+imagetest.Bucket+"/"+wantKey {
		t.Errorf("codeArtifact %v", uri)
	}
	tags := create["tags"].(map[string]any)
	if tags[imagecmd.TagTemplate] != "web" || tags[imagecmd.TagArtifactSHA256] != out.SHA256 || len(tags[imagecmd.TagBuildSHA256].(string)) != 64 || tags[imagecmd.TagRaydVersion] == nil {
		t.Errorf("tags %v", tags)
	}
	if create["name"] != "web" {
		t.Errorf("name %v", create["name"])
	}

	// Unchanged: nothing uploaded, no new version.
	r = w.build("web", "--json")
	if r.Code != 0 || !strings.Contains(r.Out, `"unchanged": true`) || !strings.Contains(r.Out, `"sha256": "`+out.SHA256+`"`) {
		t.Fatalf("rebuild: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
	if n := w.count(microvms.OpUpdateMicrovmImage); n != 0 {
		t.Errorf("%d UpdateMicrovmImage for an unchanged template", n)
	}
	if w.Puts() != 1 {
		t.Errorf("%d PUTs", w.Puts())
	}

	// --force: one new version, the artifact already in S3.
	r = w.build("web", "--force")
	if r.Code != 0 || r.Out != arn+"\n" {
		t.Fatalf("--force: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
	if n := w.count(microvms.OpUpdateMicrovmImage); n != 1 {
		t.Errorf("%d UpdateMicrovmImage with --force, want 1", n)
	}
	if uri := w.bodyOf(microvms.OpUpdateMicrovmImage)["codeArtifact"].(map[string]any)["uri"]; uri != "s3://"+imagetest.Bucket+"/"+wantKey {
		t.Errorf("update codeArtifact %v", uri)
	}
	if w.Puts() != 1 {
		t.Errorf("%d PUTs after --force", w.Puts())
	}

	// Another memory: the same artifact, another build.
	r = w.build("web", "--memory", "4096")
	if r.Code != 0 || w.count(microvms.OpUpdateMicrovmImage) != 2 {
		t.Fatalf("--memory: exit %d, %d updates\n%s", r.Code, w.count(microvms.OpUpdateMicrovmImage), r.Err)
	}

	// A changed context file: a new artifact, uploaded, built.
	imagetest.WriteTree(t, w.ctx, map[string]string{"app/main.py": "print('bye')\n"})
	r = w.build("web", "--memory", "4096", "--json")
	if r.Code != 0 || !strings.Contains(r.Out, `"uploaded": true`) || w.count(microvms.OpUpdateMicrovmImage) != 3 || w.Puts() != 2 {
		t.Fatalf("changed: exit %d, %d updates, %d puts\n%s\n%s", r.Code, w.count(microvms.OpUpdateMicrovmImage), w.Puts(), r.Out, r.Err)
	}

	// status on AWS.
	r = run(t, nil, "status", "web", "--json")
	var st statusJSON
	if r.Code != 0 || json.Unmarshal([]byte(r.Out), &st) != nil || st.State != "READY" || st.ActiveVersion != "4" || st.ImageARN != arn || len(st.SHA256) != 64 {
		t.Errorf("status: exit %d %+v\n%s", r.Code, st, r.Err)
	}
	// logs on AWS: not built, naming the log group.
	r = run(t, nil, "logs", "web")
	if r.Code != 1 || !strings.Contains(r.Err, "template logs on AWS are not built yet") || !strings.Contains(r.Err, "/rayito/web") {
		t.Errorf("logs: exit %d %s", r.Code, r.Err)
	}
	for _, rq := range w.MV.Requests() {
		if !rq.Signed {
			t.Errorf("%s %s was not signed", rq.Method, rq.Path)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// The same inputs give the same artifact, whatever the files' times.
func TestAWSArtifactDeterministic(t *testing.T) {
	w := newAWSWorld(t, 2)
	sum := func() string {
		t.Helper()
		var out bytes.Buffer
		f := &cliutil.Factory{IO: cliutil.IO{Out: &out, Err: &out}}
		cmd := &cli.Command{Flags: []cli.Flag{&cli.StringFlag{Name: "file"}, &cli.StringFlag{Name: "context"}}}
		if err := cmd.Set("file", filepath.Join(w.ctx, "Dockerfile")); err != nil {
			t.Fatal(err)
		}
		art, _, err := compileTemplate(context.Background(), f, cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer art.Close()
		zr, closeZip, err := openArtifact(art)
		if err != nil {
			t.Fatal(err)
		}
		defer closeZip()
		m, err := mergeOf("web", art, zr)
		if err != nil {
			t.Fatal(err)
		}
		a, err := imagecmd.BuildArtifact(w.Dir, t.TempDir(), build.Options{Template: m})
		if err != nil {
			t.Fatal(err)
		}
		return a.SHA256()
	}
	first := sum()
	imagetest.WriteTree(t, w.ctx, map[string]string{"app/main.py": "print('hi')\n"}) // same bytes, a new mtime
	if again := sum(); again != first {
		t.Errorf("%s then %s", first, again)
	}
}

func TestAWSBuildFailed(t *testing.T) {
	w := newAWSWorld(t, 2)
	w.MV.FailBuilds(1)
	r := w.build("bad", "--json")
	if r.Code != 1 {
		t.Fatalf("exit %d\n%s", r.Code, r.Err)
	}
	if !strings.Contains(r.Err, "rayito: template bad: the build failed (build_failed): image bad version 1 failed to build (image CREATE_FAILED, version FAILED); build id build-") {
		t.Errorf("stderr:\n%s", r.Err)
	}
	if strings.Contains(r.Err, "hook did not answer") {
		t.Errorf("the service's stateReason leaked:\n%s", r.Err)
	}
	var out awsBuildJSON
	if err := json.Unmarshal([]byte(r.Out), &out); err != nil || out.State != "FAILED" || out.Reason != ReasonBuildFailed || !strings.HasPrefix(out.BuildID, "build-") {
		t.Errorf("--json %v: %s", err, r.Out)
	}
	r = run(t, nil, "status", "bad", "--json")
	var st statusJSON
	if r.Code != 0 || json.Unmarshal([]byte(r.Out), &st) != nil || st.State != "FAILED" || st.Reason != ReasonBuildFailed || st.FailedVersion != "1" {
		t.Errorf("status: exit %d %s %s", r.Code, r.Out, r.Err)
	}
	r = run(t, nil, "logs", "bad")
	if r.Code != 1 || !strings.Contains(r.Err, "(the failed build build-") {
		t.Errorf("logs: exit %d %s", r.Code, r.Err)
	}
	// A failed build is built again, unchanged or not.
	r = w.build("bad")
	if r.Code != 0 || w.count(microvms.OpUpdateMicrovmImage) != 1 {
		t.Errorf("rebuild: exit %d, %d updates: %s", r.Code, w.count(microvms.OpUpdateMicrovmImage), r.Err)
	}
}

func TestAWSBuildQuota(t *testing.T) {
	w := newAWSWorld(t, 2)
	w.MV.Fail(microvms.OpCreateMicrovmImage, 1, 402, "ServiceQuotaExceededException", "")
	r := w.build("q", "--json")
	if r.Code != 1 || !strings.Contains(r.Err, "(build_quota)") || !strings.Contains(r.Out, `"reason": "build_quota"`) {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
	w.MV.Fail(microvms.OpGetMicrovmImage, 1, 500, "ServiceException", "")
	r = w.build("q")
	if r.Code != 1 || !strings.Contains(r.Err, "(aws_error)") {
		t.Fatalf("exit %d\n%s", r.Code, r.Err)
	}
}

func TestAWSBuildWaitTimeout(t *testing.T) {
	w := newAWSWorld(t, 1000)
	r := w.build("slow", "--wait-timeout", "50ms")
	if r.Code != 124 || !strings.Contains(r.Err, "template slow: still building after 50ms (--wait-timeout); the build goes on") {
		t.Fatalf("exit %d: %s", r.Code, r.Err)
	}
	r = run(t, nil, "status", "slow", "--json")
	if r.Code != 0 || !strings.Contains(r.Out, `"state": "BUILDING"`) {
		t.Errorf("status: exit %d %s %s", r.Code, r.Out, r.Err)
	}
}

// An image that is not this template's is refused before any upload.
func TestAWSBuildNotATemplate(t *testing.T) {
	w := newAWSWorld(t, 2)
	w.MV.AddImage("plain")
	r := w.build("plain")
	if r.Code != 1 || !strings.Contains(r.Err, "image plain exists and is not the template plain (its rayito:template tag)") {
		t.Fatalf("exit %d: %s", r.Code, r.Err)
	}
	if w.Puts() != 0 || w.count(microvms.OpUpdateMicrovmImage) != 0 {
		t.Error("something was uploaded or built")
	}
	r = run(t, nil, "status", "plain")
	if r.Code != 1 || !strings.Contains(r.Err, "is not a template") {
		t.Errorf("status: exit %d %s", r.Code, r.Err)
	}
}

// Mistakes are usage errors before anything is sent.
func TestAWSBuildUsage(t *testing.T) {
	w := newAWSWorld(t, 2)
	for _, c := range []struct {
		dockerfile string
		args       []string
		want       string
	}{
		{"FROM local\nRUN true\n", nil, "base_image_unsupported: FROM local is the local platform's base; on AWS a template builds on the Rayito image: FROM rayito"},
		{"FROM python:3.12\nRUN true\n", nil, "base_image_unsupported: on AWS a template builds on the Rayito image only"},
		{"FROM rayito\nADD x /x\n", nil, "ADD"},
		{testDockerfile, []string{"--no-wait"}, "--no-wait is not supported on AWS"},
		{testDockerfile, []string{"--memory", "3"}, "--memory 3"},
		{testDockerfile, []string{"--image-dir", "/nonexistent"}, "no such directory"},
	} {
		imagetest.WriteTree(t, w.ctx, map[string]string{"Dockerfile": c.dockerfile})
		r := w.build("u", c.args...)
		if r.Code != 2 || !strings.Contains(r.Err, c.want) {
			t.Errorf("%q %v: exit %d %s; want %q", c.dockerfile, c.args, r.Code, r.Err, c.want)
		}
	}
	// A broken image tree is base_image_invalid.
	imagetest.WriteTree(t, w.ctx, map[string]string{"Dockerfile": testDockerfile})
	imagetest.WriteTree(t, w.Dir, map[string]string{"base.digest": "nope\n"})
	if r := w.build("u"); r.Code != 2 || !strings.Contains(r.Err, "base_image_invalid") {
		t.Errorf("bad digest: exit %d %s", r.Code, r.Err)
	}
	// A bad name.
	if r := w.build("Bad"); r.Code != 2 || !strings.Contains(r.Err, `template name "Bad"`) {
		t.Errorf("bad name: exit %d %s", r.Code, r.Err)
	}
	// The AWS flags on the local platform.
	r := run(t, map[string]string{"RAYITO_BACKEND": "local"}, "build", "u", "--bucket", imagetest.Bucket)
	if r.Code != 2 || !strings.Contains(r.Err, "--bucket is for template builds on AWS") {
		t.Errorf("local --bucket: exit %d %s", r.Code, r.Err)
	}
	if n := len(w.MV.Requests()); n != 0 || len(w.S3Requests()) != 0 {
		t.Errorf("%d control-plane requests (%v), S3 %v", n, w.Ops(), w.S3Requests())
	}
}

func TestClassifyBuild(t *testing.T) {
	for in, want := range map[string]string{
		"": ReasonBuildFailed,
		"The build failed: the ready hook did not answer 200.":                                 ReasonBuildFailed,
		`process "/bin/sh -c apt-get install x" did not complete successfully: exit code: 100`: ReasonRunStepFailed,
		"The command '/bin/sh -c make' returned a non-zero code: 2":                            ReasonRunStepFailed,
		"executor failed running [/bin/sh -c false]: exit code: 1":                             ReasonRunStepFailed,
		"Build timed out after 30 minutes":                                                     ReasonBuildTimeout,
	} {
		if got := ClassifyBuild(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
