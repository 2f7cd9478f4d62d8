package image

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// image gives the fake an image name with versions 1..n, all SUCCESSFUL
// and ACTIVE, and returns its ARN.
func (w *world) image(name string, n int) string {
	w.t.Helper()
	arn := w.mv.AddImage(name)
	c := w.client()
	ctx := context.Background()
	for i := 2; i <= n; i++ {
		cfg := microvmsapi.ImageBuildConfig{
			BaseImageArn: w.mv.ManagedImageARN(microvmstest.ManagedImage), BuildRoleArn: testRole,
			CodeArtifact: &microvmsapi.CodeArtifact{URI: fmt.Sprintf("s3://%s/v%d.zip", testBucket, i)},
		}
		if _, err := c.UpdateMicrovmImage(ctx, arn, &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: cfg}); err != nil {
			w.t.Fatal(err)
		}
		w.settle(arn)
	}
	return arn
}

// settle polls the image until it is no longer busy.
func (w *world) settle(arn string) {
	w.t.Helper()
	c := w.client()
	for range 100 {
		img, err := c.GetMicrovmImage(context.Background(), arn)
		if err != nil {
			w.t.Fatal(err)
		}
		if !busy(img.State) {
			return
		}
	}
	w.t.Fatal("the image stays busy")
}

func (w *world) client() *microvms.Client {
	w.t.Helper()
	c, err := w.mv.Client(microvms.WithoutRateLimits())
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func versionsOf(t *testing.T, c *microvms.Client, arn string) []string {
	t.Helper()
	vs, err := listVersions(context.Background(), c, arn)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.ImageVersion)
	}
	return names
}

func TestList(t *testing.T) {
	w := newWorld(t, 2)
	r := w.run("list", "--json")
	if r.code != 0 || strings.TrimSpace(r.out) != "[]" {
		t.Fatalf("empty account: exit %d %q %s", r.code, r.out, r.err)
	}
	arn := w.image("rayito-a", 3)
	w.mv.AddImage("rayito-b")

	r = w.run("list")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.Contains(lines[1], "rayito-a") || !strings.Contains(lines[1], "UPDATED") || !strings.Contains(lines[1], arn) {
		t.Errorf("list:\n%s", r.out)
	}

	r = w.run("list", "--json")
	var imgs []imageItem
	if err := json.Unmarshal([]byte(r.out), &imgs); err != nil || len(imgs) != 2 {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if imgs[0] != (imageItem{Name: "rayito-a", ARN: arn, State: "UPDATED", LatestActiveVersion: "3"}) {
		t.Errorf("%+v", imgs[0])
	}

	for _, ident := range []string{"rayito-a", arn} {
		r = w.run("list", ident, "--json")
		var vs []versionItem
		if err := json.Unmarshal([]byte(r.out), &vs); err != nil || len(vs) != 3 {
			t.Fatalf("%v\n%s%s", err, r.out, r.err)
		}
		if vs[2].Version != "3" || vs[2].State != "SUCCESSFUL" || vs[2].Status != "ACTIVE" || vs[2].CreatedAt == nil {
			t.Errorf("%+v", vs[2])
		}
	}
	r = w.run("list", "rayito-a")
	if lines := strings.Split(strings.TrimSpace(r.out), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "VERSION  STATE") ||
		!strings.HasPrefix(lines[1], "1 ") || !strings.Contains(lines[1], "SUCCESSFUL  ACTIVE") {
		t.Errorf("versions:\n%s", r.out)
	}

	r = w.run("list", "rayito-none")
	if r.code != 1 || !strings.Contains(r.err, "image rayito-none not found in us-east-1") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	r = w.run("list", "bad name!")
	if r.code != 2 {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
	r = w.run("list", "a", "b")
	if r.code != 2 {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
}

func TestPlan(t *testing.T) {
	v := func(name string, st microvmsapi.VersionState, status microvmsapi.VersionStatus) microvmsapi.MicrovmImageVersion {
		return microvmsapi.MicrovmImageVersion{ImageVersion: name, State: st, Status: status}
	}
	const (
		ok     = microvmsapi.VersionSuccessful
		active = microvmsapi.VersionActive
		off    = microvmsapi.VersionInactive
	)
	vs := []microvmsapi.MicrovmImageVersion{
		v("1", ok, active), v("2", microvmsapi.VersionFailed, off), v("3", ok, active),
		v("4", ok, off), v("5", ok, off), v("6", microvmsapi.VersionInProgress, off),
	}
	// --keep 2: 5 and 4 are the newest successful; 3 the latest ACTIVE;
	// 6 is building; 1 and 2 go.
	got := plan(vs, "3", 2)
	want := []string{"1:", "2:", "3:keep:latest ACTIVE", "4:keep:one of the 2 newest SUCCESSFUL", "5:keep:one of the 2 newest SUCCESSFUL", "6:skip:still building"}
	var have []string
	for _, it := range got {
		s := it.Version + ":" + it.Action
		if it.Reason != "" {
			s += ":" + it.Reason
		}
		have = append(have, s)
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("plan %q, want %q", have, want)
	}
	// Without the image's latestActiveImageVersion, the newest launchable.
	if got := plan(vs, "", 1); got[2].Action != actKeep || got[2].Reason != "latest ACTIVE" || got[0].Action != "" {
		t.Errorf("%+v", got)
	}
}

func TestPrune(t *testing.T) {
	w := newWorld(t, 3)
	arn := w.image("rayito-p", 5)
	c := w.client()
	ctx := context.Background()
	// A live microVM on version 2 (simulated: PENDING, not TERMINATED).
	if _, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, ImageVersion: "2",
		Logging: &microvmsapi.Logging{Disabled: &struct{}{}}}); err != nil {
		t.Fatal(err)
	}

	deletes := func() int {
		n := 0
		for _, r := range w.mv.Requests() {
			if r.Op == microvms.OpDeleteMicrovmImageVersion {
				n++
				if r.Status != 200 {
					t.Errorf("DeleteMicrovmImageVersion answered %d: not serialised", r.Status)
				}
			}
		}
		return n
	}

	// --dry-run: the plan, nothing deleted.
	r := w.run("prune", "rayito-p", "--keep", "2", "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	wantLines := []string{
		"delete   1  SUCCESSFUL ACTIVE  (dry run: not deleted)",
		"skip     2  SUCCESSFUL ACTIVE  (in use by 1 microVM)",
		"delete   3  SUCCESSFUL ACTIVE  (dry run: not deleted)",
		"keep     4  SUCCESSFUL ACTIVE  (one of the 2 newest SUCCESSFUL)",
		"keep     5  SUCCESSFUL ACTIVE  (one of the 2 newest SUCCESSFUL, latest ACTIVE)",
	}
	if got := strings.Split(strings.TrimSpace(r.out), "\n"); !reflect.DeepEqual(got, wantLines) {
		t.Errorf("dry run:\n%s\nwant:\n%s", r.out, strings.Join(wantLines, "\n"))
	}
	if deletes() != 0 {
		t.Fatal("--dry-run deleted")
	}
	if got := versionsOf(t, c, arn); len(got) != 5 {
		t.Fatalf("versions %v", got)
	}

	// For real: 1 then 3, one at a time (each waits for the image to leave
	// UPDATING), 2 skipped.
	r = w.run("prune", "rayito-p", "--keep", "2", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var out pruneOut
	if err := json.Unmarshal([]byte(r.out), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	actions := map[string]string{}
	for _, it := range out.Versions {
		actions[it.Version] = it.Action
	}
	if out.ARN != arn || out.DryRun || !reflect.DeepEqual(actions, map[string]string{"1": "deleted", "2": "skip", "3": "deleted", "4": "keep", "5": "keep"}) {
		t.Errorf("%+v", out)
	}
	if n := deletes(); n != 2 {
		t.Errorf("%d deletions, want 2", n)
	}
	if !strings.Contains(r.err, "the image is UPDATING: waiting before the next deletion") {
		t.Errorf("stderr:\n%s", r.err)
	}
	w.settle(arn)
	if got := versionsOf(t, c, arn); !reflect.DeepEqual(got, []string{"2", "4", "5"}) {
		t.Errorf("versions left %v", got)
	}
	// The deletions were in order, oldest first.
	var order []string
	for _, rq := range w.mv.Requests() {
		if rq.Op == microvms.OpDeleteMicrovmImageVersion {
			order = append(order, rq.Path[strings.LastIndex(rq.Path, "/")+1:])
		}
	}
	if !reflect.DeepEqual(order, []string{"1", "3"}) {
		t.Errorf("deleted %v", order)
	}
}

func TestPruneUsage(t *testing.T) {
	w := newWorld(t, 2)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"prune", "rayito-p"}, "--keep is required"},
		{[]string{"prune", "rayito-p", "--keep", "0"}, "--keep 0: keep at least 1 version"},
		{[]string{"prune", "rayito-p", "--keep", "-3"}, "--keep -3"},
		{[]string{"prune", "--keep", "2"}, "prune takes one argument"},
		{[]string{"prune", "a b", "--keep", "2"}, "neither an image name"},
	} {
		r := w.run(c.args...)
		if r.code != 2 || !strings.Contains(r.err, c.want) {
			t.Errorf("%v: exit %d %q", c.args, r.code, r.err)
		}
	}
	if n := len(w.mv.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
	r := w.run("prune", "rayito-none", "--keep", "1")
	if r.code != 1 || !strings.Contains(r.err, "image rayito-none not found") {
		t.Errorf("exit %d: %s", r.code, r.err)
	}
}

func TestBackoff(t *testing.T) {
	old1, old2 := pollFirst, pollMax
	defer func() { pollFirst, pollMax = old1, old2 }()
	pollFirst, pollMax = 2*time.Second, 10*time.Second
	var b backoff
	var got []time.Duration
	for range 5 {
		got = append(got, b.step())
	}
	if want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}; !reflect.DeepEqual(got, want) {
		t.Errorf("%v", got)
	}
}

// On a terminal the progress is one line redrawn in place and cleared at
// the end; elsewhere one plain line per change of state.
func TestProgress(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b, tty: true, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.tick()
	p.set("image x: CREATING")
	p.set("image x: CREATING")
	p.finish()
	if s := b.String(); !strings.HasPrefix(s, "\r\033[Kimage x: CREATING (0s)") || !strings.HasSuffix(s, "\r\033[K") || strings.Contains(s, "\n") {
		t.Errorf("terminal: %q", s)
	}
	b.Reset()
	p = newProgress(&b) // not a terminal
	p.set("a")
	p.set("a")
	p.set("b")
	p.finish()
	if s := b.String(); s != "a (0s)\nb (0s)\n" {
		t.Errorf("plain: %q", s)
	}
}
