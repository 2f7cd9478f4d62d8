package code_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// requirePython skips unless /usr/bin/python3 imports every module named.
func requirePython(t *testing.T, modules ...string) {
	t.Helper()
	py := "/usr/bin/python3"
	p, err := raydtest.Supervisor().Start(proc.Spec{Path: py, Args: []string{py, "-c", "import " + strings.Join(modules, ", ")}, Env: []string{}, Dir: "/"})
	if err != nil {
		t.Skipf("no %s: %v", py, err)
	}
	<-p.Done()
	if x, _ := p.Exit(); x.Status != proc.StatusExited || x.ExitCode != 0 {
		t.Skipf("%s lacks %s (Debian: python3-%s; make deps installs them as root)", py, strings.Join(modules, ", "), strings.Join(modules, ", python3-"))
	}
}

// chartOf decodes the e2b/chart of the first result that has one.
func chartOf(t *testing.T, c *cell) map[string]any {
	t.Helper()
	for _, r := range c.results {
		if r.Chart != nil {
			var m map[string]any
			if err := json.Unmarshal([]byte(r.GetChart()), &m); err != nil {
				t.Fatalf("chart is not JSON: %v", err)
			}
			if r.Png == nil {
				t.Errorf("the chart's result has no image")
			}
			return m
		}
	}
	t.Fatalf("no result with a chart: events %v, stderr %q", c.kinds, c.stderr)
	return nil
}

// column collects one key of every element.
func column(chart map[string]any, key string) []any {
	var out []any
	for _, e := range chart["elements"].([]any) {
		out = append(out, e.(map[string]any)[key])
	}
	return out
}

func wantFields(t *testing.T, what string, chart map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := chart[k]; !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s: %s = %#v (present %v), want %#v", what, k, got, ok, v)
		}
	}
}

// TestCodeChartResults: a matplotlib figure's result carries, beside its
// image, its chart in E2B's e2b/chart shape: the type read from what is
// drawn, titles, labels and units, ticks and scales, and the elements.
func TestCodeChartResults(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)

	c := chartOf(t, execCell(h, nil, "import matplotlib.pyplot as plt\n"+
		"plt.figure(figsize=(6, 4))\n"+
		"plt.bar(['A', 'B', 'C'], [10, 20, 30.5], label='Sold')\n"+
		"plt.xlabel('Authors'); plt.ylabel('Books [k]'); plt.title('Sales')\n"+
		"plt.show()", 0))
	wantFields(t, "bar", c, map[string]any{"type": "bar", "title": "Sales", "x_label": "Authors", "y_label": "Books [k]", "x_unit": nil, "y_unit": "k"})
	if got := column(c, "label"); !reflect.DeepEqual(got, []any{"A", "B", "C"}) {
		t.Errorf("bar labels %v", got)
	}
	if got := column(c, "value"); !reflect.DeepEqual(got, []any{10.0, 20.0, 30.5}) {
		t.Errorf("bar values %v", got)
	}
	if got := column(c, "group"); !reflect.DeepEqual(got, []any{"Sold", "Sold", "Sold"}) {
		t.Errorf("bar groups %v", got)
	}

	c = chartOf(t, execCell(h, nil, "import matplotlib.pyplot as plt\n"+
		"fig, ax = plt.subplots()\n"+
		"ax.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=['A', 'B'], patch_artist=True)\n"+
		"ax.set_title('Scores'); ax.set_xlabel('Class'); ax.set_ylabel('Score')\n"+
		"plt.show()", 0))
	wantFields(t, "box", c, map[string]any{"type": "box_and_whisker", "title": "Scores", "x_label": "Class", "y_label": "Score"})
	for k, want := range map[string][]any{
		"label": {"A", "B"}, "min": {78.0, 84.0}, "first_quartile": {85.0, 84.75}, "median": {88.0, 88.0},
		"third_quartile": {90.0, 90.5}, "max": {92.0, 95.0}, "outliers": {[]any{}, []any{76.0}},
	} {
		if got := column(c, k); !reflect.DeepEqual(got, want) {
			t.Errorf("box %s: %v, want %v", k, got, want)
		}
	}

	c = chartOf(t, execCell(h, nil, "import matplotlib.pyplot as plt\n"+
		"fig, ax = plt.subplots()\n"+
		"ax.pie([90, 10], labels=['No', 'Yes'], autopct='%1.1f%%', startangle=90)\n"+
		"plt.title('Pie'); plt.show()", 0))
	wantFields(t, "pie", c, map[string]any{"type": "pie", "title": "Pie"})
	if got := column(c, "angle"); !reflect.DeepEqual(got, []any{324.0, 36.0}) {
		t.Errorf("pie angles %v", got)
	}
	if got := column(c, "radius"); !reflect.DeepEqual(got, []any{1.0, 1.0}) {
		t.Errorf("pie radii %v", got)
	}

	c = chartOf(t, execCell(h, nil, "import matplotlib.pyplot as plt, datetime\n"+
		"d = [datetime.date(2023, 9, 1) + datetime.timedelta(days=i) for i in range(5)]\n"+
		"plt.figure(); plt.plot(d, [1, 2, 3, 2, 1], label='up'); plt.plot(d, [0, 1, 0, 1, 0])\n"+
		"plt.xlabel('Time (s)'); plt.yscale('log'); plt.show()", 0))
	wantFields(t, "line", c, map[string]any{"type": "line", "title": nil, "x_label": "Time (s)", "x_unit": "s", "y_label": nil, "x_scale": "datetime", "y_scale": "log"})
	if got := column(c, "label"); !reflect.DeepEqual(got, []any{"up", "Line 1"}) {
		t.Errorf("line labels %v", got)
	}
	first := c["elements"].([]any)[0].(map[string]any)["points"].([]any)
	if len(first) != 5 || !reflect.DeepEqual(first[0], []any{"2023-09-01", 1.0}) {
		t.Errorf("line points %v", first)
	}
	if ticks, labels := c["x_ticks"].([]any), c["x_tick_labels"].([]any); len(ticks) == 0 || len(ticks) != len(labels) {
		t.Errorf("x ticks %v, labels %v", ticks, labels)
	} else if _, ok := ticks[0].(string); !ok {
		t.Errorf("datetime ticks are not ISO text: %v", ticks)
	}

	// Agg (plt.show() displays through rayd's own patch), a categorical
	// axis, scatter, and a figure of two axes.
	c = chartOf(t, execCell(h, nil, "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"+
		"fig, axs = plt.subplots(1, 2); fig.suptitle('Both')\n"+
		"axs[0].plot([1, 2, 3], ['a', 'b', 'c']); axs[0].set_title('Cat')\n"+
		"axs[1].scatter([1, 2], [3, 4], label='pts'); axs[1].set_xlabel('X')\n"+
		"plt.show()", 0))
	wantFields(t, "superchart", c, map[string]any{"type": "superchart", "title": "Both"})
	charts := c["elements"].([]any)
	if len(charts) != 2 {
		t.Fatalf("superchart elements %v", charts)
	}
	wantFields(t, "sub 0", charts[0].(map[string]any), map[string]any{"type": "line", "title": "Cat", "y_scale": "categorical", "x_scale": "linear", "y_tick_labels": []any{"a", "b", "c"}})
	wantFields(t, "sub 1", charts[1].(map[string]any), map[string]any{"type": "scatter", "x_label": "X", "elements": []any{map[string]any{"label": "pts", "points": []any{[]any{1.0, 3.0}, []any{2.0, 4.0}}}}})

	c = chartOf(t, execCell(h, nil, "import matplotlib.pyplot as plt\n"+
		"fig, ax = plt.subplots(); ax.add_artist(plt.Circle((0, 0), 1)); plt.title('Circle'); plt.show()", 0))
	wantFields(t, "unknown", c, map[string]any{"type": "unknown", "title": "Circle", "elements": []any{}})

	// A figure with nothing drawn, or with more points than a result
	// should carry (a million, or 4 MiB of JSON), has an image and no
	// chart.
	for _, src := range []string{"plt.figure()", "plt.figure(); plt.plot(range(1000001))", "plt.figure(); plt.plot([i / 7 for i in range(300000)])"} {
		e := execCell(h, nil, "import matplotlib.pyplot as plt\n"+src+"; plt.show()", 0)
		if len(e.results) != 1 {
			t.Errorf("%s: results %v", src, e.kinds)
		} else if e.results[0].Png == nil || e.results[0].Chart != nil {
			t.Errorf("%s: png %v, chart %.100s", src, e.results[0].Png != nil, e.results[0].GetChart())
		}
	}
}

// TestCodeDataFrameResult: a pandas DataFrame's result carries its
// columns as e2b/data, with JSON-safe values; its text and html remain.
func TestCodeDataFrameResult(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	requirePython(t, "pandas")
	h := daemontest.New(t)
	h.Run(nil)
	c := execCell(h, nil, "import pandas as pd, numpy as np\n"+
		"pd.DataFrame({'a': [1, 2, 3], 't': pd.to_datetime(['2024-01-02', None, '2024-01-03']), 'f': [1.5, np.nan, 2], 3: ['x', None, 'z']})", 0)
	m := c.main()
	if m == nil || m.Data == nil || m.Html == nil || m.Text == nil {
		t.Fatalf("main result %v (events %v, stderr %q)", m, c.kinds, c.stderr)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(m.GetData()), &data); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": []any{1.0, 2.0, 3.0},
		"t": []any{"2024-01-02T00:00:00", nil, "2024-01-03T00:00:00"},
		"f": []any{1.5, nil, 2.0},
		"3": []any{"x", nil, "z"},
	}
	if !reflect.DeepEqual(data, want) {
		t.Errorf("e2b/data %v, want %v", data, want)
	}
	// Other values get none; nor does a frame whose data passes 4 MiB of
	// JSON (its text and html come).
	if c := execCell(h, nil, "1 + 1", 0); c.main().Data != nil {
		t.Errorf("an int got e2b/data")
	}
	if c := execCell(h, nil, "pd.DataFrame({'s': ['x' * 100] * 50000})", 0); c.main() == nil || c.main().Data != nil || c.main().Html == nil {
		t.Errorf("a 5 MB frame: %v", c.kinds)
	}
}

// TestCodeJSONAndImageResults: a dict or list result carries itself as
// application/json (numpy values and NaN made JSON); a value that is not
// JSON, or too large, gets none; saving a PIL image to a file displays
// it.
func TestCodeJSONAndImageResults(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	c := execCell(h, nil, "import numpy as np\n{'a': np.int64(3), 'b': [1, 2.5, float('nan')], 4: None}", 0)
	if got := c.main().GetJson(); got != `{"a":3,"b":[1,2.5,null],"4":null}` {
		t.Errorf("dict json %q", got)
	}
	if c := execCell(h, nil, "[1, object()]", 0); c.main().Json != nil {
		t.Errorf("a list of objects got json %q", c.main().GetJson())
	}
	// Too large a value gets no json, and its text (cut by IPython) comes.
	if c := execCell(h, nil, "list(range(1000000))", 0); c.main().Json != nil || !strings.HasSuffix(c.main().GetText(), "...]") {
		t.Errorf("a long list: json %d bytes, text ends %q", len(c.main().GetJson()), c.main().GetText()[max(0, len(c.main().GetText())-20):])
	}
	requirePython(t, "PIL")
	c = execCell(h, nil, "from PIL import Image\nImage.new('RGB', (4, 4)).save('/tmp/rayd-test-save.png')\nprint('saved')", 0)
	if len(c.results) != 1 || c.results[0].Png == nil || c.stdout != "saved\n" {
		t.Fatalf("save: results %v, stdout %q, stderr %q", c.results, c.stdout, c.stderr)
	}
}

// TestCodeContextsListedFromTheStart: the default Python context is
// listed before any cell ran (its kernel not started yet), first, with the
// directory its kernel then runs in; the other contexts are listed in the
// order they were made, so the last is the newest.
func TestCodeContextsListedFromTheStart(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	ctx := context.Background()
	list := func() []*raydv1.CodeContext {
		t.Helper()
		resp, err := h.Code().ListContexts(ctx, connect.NewRequest(&raydv1.ListContextsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.GetContexts()
	}
	made := []string{createContext(h, nil)}
	got := list()
	if len(got) != 2 || got[0].GetContextId() != "default-python" || got[0].GetLanguage() != "python" || got[0].GetCwd() == "" || got[1].GetContextId() != made[0] {
		t.Fatalf("before any cell: %v", got)
	}
	for _, k := range h.Daemon.Code.Kernels() {
		if k.ContextID == "default-python" {
			t.Errorf("listing started default-python's kernel")
		}
	}
	if c := execCell(h, nil, "import os; os.getcwd()", 0); c.main().GetText() != "'"+got[0].GetCwd()+"'" {
		t.Errorf("default-python runs in %s, listed with cwd %q", c.main().GetText(), got[0].GetCwd())
	}
	for range 3 {
		made = append(made, createContext(h, nil))
	}
	got = list()
	var ids []string
	for _, c := range got {
		ids = append(ids, c.GetContextId())
	}
	if len(ids) != 5 || ids[0] != "default-python" || !reflect.DeepEqual(ids[1:], made) {
		t.Errorf("listed %v, want default-python then %v", ids, made)
	}
	if got[4].GetCwd() != got[0].GetCwd() {
		t.Errorf("a context made without cwd lists %q, default-python %q", got[4].GetCwd(), got[0].GetCwd())
	}
}

// TestCodeMissingKernelsNamed: R and Java are languages; without their
// kernels, a context or a cell of them is refused as unimplemented naming
// the kernel (as bash and JavaScript are); an unknown language is an
// invalid argument naming the languages.
func TestCodeMissingKernelsNamed(t *testing.T) {
	h := daemontest.NewWith(t, func(c *daemon.Config) { c.SetTestKnobs(daemon.TestKnobs{KernelSpecDirs: []string{t.TempDir()}}) })
	h.Run(nil)
	ctx := context.Background()
	for lang, name := range map[string]string{"r": "R kernel (IRkernel)", "R": "R kernel (IRkernel)", "java": "Java kernel (IJava)", "bash": "bash kernel", "js": "JavaScript kernel"} {
		_, err := h.Code().CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{Language: lang}))
		if raydtest.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), name) {
			t.Errorf("create %s: %v", lang, err)
		}
		s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{Language: &lang, Code: "1"}))
		if err == nil {
			for s.Receive() {
			}
			err = s.Err()
		}
		if raydtest.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), name) {
			t.Errorf("execute %s: %v", lang, err)
		}
	}
	_, err := h.Code().CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{Language: "cobol"}))
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "r or java") {
		t.Errorf("create cobol: %v", err)
	}
}
