// Package workflowcheck holds the repository's policy for its GitHub
// Actions workflows and its Dependabot configuration
// (shared/spec/security-model.md, "Supply chain"): least-privilege
// permissions, actions pinned by commit sha, and a release whose build has
// no credentials, whose signing and publishing jobs neither check out nor
// build and verify SHA256SUMS first, that restores no Actions cache and
// never replaces a published asset. actionlint checks that the files are
// valid workflows; this package checks what they are allowed to do.
//
// Its test runs the checks over .github/ (make lint-workflows).
package workflowcheck

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ReleaseTags are the tag patterns the release workflow, and only it,
// triggers on: one path-prefixed tag per released module.
var ReleaseTags = []string{"proto/v*", "rayd/v*", "sdk/v*", "localvm/v*", "cli/v*"}

// Job ids of the release workflow whose rights the policy fixes.
const (
	BuildJob   = "build"
	SignJob    = "sign"
	PublishJob = "publish"
	// ReleaseEnvironment is the protected environment (maintainer's
	// approval) that the jobs with credentials run in.
	ReleaseEnvironment = "release"
)

// Workflow is the part of a workflow file the policy reads.
type Workflow struct {
	On          yaml.Node    `yaml:"on"`
	Permissions *Permissions `yaml:"permissions"`
	Jobs        map[string]*Job
	jobOrder    []string
}

// Permissions is a permissions block: either a shorthand ("read-all",
// "write-all", or {} for none) or scope -> "read" | "write" | "none".
type Permissions struct {
	Shorthand string
	Scopes    map[string]string
}

// UnmarshalYAML accepts both forms of a permissions block.
func (p *Permissions) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		p.Shorthand = n.Value
		return nil
	case yaml.MappingNode:
		return n.Decode(&p.Scopes)
	}
	return fmt.Errorf("line %d: permissions must be a string or a mapping", n.Line)
}

// Writes returns the scopes granted write, sorted.
func (p *Permissions) Writes() []string {
	var w []string
	for s, v := range p.Scopes {
		if v == "write" {
			w = append(w, s)
		}
	}
	sort.Strings(w)
	return w
}

// Job is one job of a workflow.
type Job struct {
	Needs       stringList   `yaml:"needs"`
	If          string       `yaml:"if"`
	Environment environment  `yaml:"environment"`
	Permissions *Permissions `yaml:"permissions"`
	Uses        string       `yaml:"uses"` // a reusable workflow
	Steps       []Step       `yaml:"steps"`
	node        yaml.Node
}

// Step is one step of a job.
type Step struct {
	Name        string               `yaml:"name"`
	Uses        string               `yaml:"uses"`
	Run         string               `yaml:"run"`
	With        map[string]yaml.Node `yaml:"with"`
	Env         map[string]yaml.Node `yaml:"env"`
	Line        int                  `yaml:"-"`
	UsesComment string               `yaml:"-"` // the comment after uses:, without '#'
}

// UnmarshalYAML keeps the step's line and the comment after its uses:.
func (s *Step) UnmarshalYAML(n *yaml.Node) error {
	type plain Step
	if err := n.Decode((*plain)(s)); err != nil {
		return err
	}
	s.Line = n.Line
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "uses" {
			s.UsesComment = strings.TrimSpace(strings.TrimPrefix(n.Content[i+1].LineComment, "#"))
		}
	}
	return nil
}

// with returns a with: input as written ("" when absent).
func (s *Step) with(key string) (string, bool) {
	v, ok := s.With[key]
	return v.Value, ok
}

// action is the action a step uses without its ref: "actions/checkout".
func (s *Step) action() string {
	a, _, _ := strings.Cut(s.Uses, "@")
	return a
}

// text is what the step hands to a shell or an action: its script and
// its with: and env: values.
func (s *Step) text() string {
	var b strings.Builder
	b.WriteString(s.Run)
	for _, m := range []map[string]yaml.Node{s.With, s.Env} {
		for _, v := range m {
			b.WriteString("\n" + v.Value)
		}
	}
	return b.String()
}

type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	return n.Decode((*[]string)(l))
}

// environment is a job's environment: a name or {name, url}.
type environment string

func (e *environment) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*e = environment(n.Value)
		return nil
	}
	var v struct{ Name string }
	if err := n.Decode(&v); err != nil {
		return err
	}
	*e = environment(v.Name)
	return nil
}

// Parse reads a workflow file.
func Parse(data []byte) (*Workflow, error) {
	var raw struct {
		On          yaml.Node    `yaml:"on"`
		Permissions *Permissions `yaml:"permissions"`
		Jobs        yaml.Node    `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	w := &Workflow{On: raw.On, Permissions: raw.Permissions, Jobs: map[string]*Job{}}
	if raw.Jobs.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("no jobs mapping")
	}
	for i := 0; i+1 < len(raw.Jobs.Content); i += 2 {
		id, n := raw.Jobs.Content[i].Value, raw.Jobs.Content[i+1]
		j := &Job{node: *n}
		if err := n.Decode(j); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		w.Jobs[id] = j
		w.jobOrder = append(w.jobOrder, id)
	}
	return w, nil
}

// problems collects what a check finds, each prefixed by where.
type problems struct {
	file string
	list []string
}

func (p *problems) add(where, format string, args ...any) {
	prefix := p.file + ": "
	if where != "" {
		prefix += where + ": "
	}
	p.list = append(p.list, prefix+fmt.Sprintf(format, args...))
}

var (
	shaPinned    = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)
	dockerPinned = regexp.MustCompile(`^docker://[^@]+@sha256:[0-9a-f]{64}$`)
	versionNote  = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*\S*`)
	clobber      = regexp.MustCompile(`--clobber\b`)
	sumsCheck    = regexp.MustCompile(`sha256sum\s+(-[A-Za-z-]+\s+)*(-c|--check)\b[^\n]*SHA256SUMS`)
	hexDigest    = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	download     = regexp.MustCompile(`\b(curl|wget)\s`)
	buildTool    = regexp.MustCompile(`(^|[\s;&|(])(make|go|cargo|npm|pnpm)\s`)
)

// Check applies the rules every workflow follows. A file that does not
// parse is itself a problem.
func Check(file string, data []byte) []string {
	p := &problems{file: file}
	if w, err := Parse(data); err != nil {
		p.add("", "does not parse: %v", err)
	} else {
		checkCommon(p, w)
	}
	return p.list
}

// CheckRelease applies the common rules and the release workflow's.
func CheckRelease(file string, data []byte) []string {
	p := &problems{file: file}
	w, err := Parse(data)
	if err != nil {
		p.add("", "does not parse: %v", err)
		return p.list
	}
	checkCommon(p, w)
	checkRelease(p, w)
	return p.list
}

func checkCommon(p *problems, w *Workflow) {
	if w.On.Kind == 0 {
		p.add("", "no on: triggers")
	}
	for _, ev := range triggers(&w.On) {
		if ev == "pull_request_target" || ev == "workflow_run" {
			p.add("on", "%s runs with the base repository's rights on code it does not control: not allowed", ev)
		}
	}
	if w.Permissions != nil {
		if w.Permissions.Shorthand != "" {
			p.add("permissions", "%q: list the scopes (contents: read), never a shorthand", w.Permissions.Shorthand)
		}
		if wr := w.Permissions.Writes(); len(wr) > 0 {
			p.add("permissions", "write at the top level (%s): grant it only to the job that needs it", strings.Join(wr, ", "))
		}
	}
	for _, id := range w.jobOrder {
		j := w.Jobs[id]
		where := "job " + id
		switch {
		case j.Permissions == nil && w.Permissions == nil:
			p.add(where, "no permissions, neither on the job nor at the top level (the default token may write)")
		case j.Permissions != nil && j.Permissions.Shorthand != "":
			p.add(where, "permissions %q: list the scopes, never a shorthand", j.Permissions.Shorthand)
		}
		if j.Uses != "" && !strings.HasPrefix(j.Uses, "./") && !shaPinned.MatchString(j.Uses) {
			p.add(where, "uses %s: pin the reusable workflow by a 40-hex commit sha", j.Uses)
		}
		for _, s := range j.Steps {
			checkPinned(p, where, &s)
			if clobber.MatchString(s.text()) {
				p.add(stepWhere(where, &s), "--clobber replaces a published asset: never")
			}
		}
	}
}

func checkPinned(p *problems, where string, s *Step) {
	switch {
	case s.Uses == "" || strings.HasPrefix(s.Uses, "./"):
	case strings.HasPrefix(s.Uses, "docker://"):
		if !dockerPinned.MatchString(s.Uses) {
			p.add(stepWhere(where, s), "uses %s: pin the image by its sha256 digest", s.Uses)
		}
	case !shaPinned.MatchString(s.Uses):
		p.add(stepWhere(where, s), "uses %s: pin the action by a full 40-hex commit sha", s.Uses)
	case !versionNote.MatchString(s.UsesComment):
		p.add(stepWhere(where, s), "uses %s: name the version it pins in a trailing comment (# v1.2.3)", s.Uses)
	}
}

func stepWhere(job string, s *Step) string {
	name := s.Name
	if name == "" {
		name = s.Uses
	}
	if name == "" {
		name = "run"
	}
	return fmt.Sprintf("%s step %q (line %d)", job, name, s.Line)
}

// triggers lists the events of an on: (a name, a list or a mapping).
func triggers(on *yaml.Node) []string {
	switch on.Kind {
	case yaml.ScalarNode:
		return []string{on.Value}
	case yaml.SequenceNode:
		var l []string
		for _, n := range on.Content {
			l = append(l, n.Value)
		}
		return l
	case yaml.MappingNode:
		var l []string
		for i := 0; i < len(on.Content); i += 2 {
			l = append(l, on.Content[i].Value)
		}
		return l
	}
	return nil
}

func mappingKeys(n *yaml.Node) map[string]*yaml.Node {
	m := map[string]*yaml.Node{}
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = n.Content[i+1]
		}
	}
	return m
}

func checkRelease(p *problems, w *Workflow) {
	checkReleaseTriggers(p, w)

	for _, id := range []string{BuildJob, SignJob, PublishJob} {
		if w.Jobs[id] == nil {
			p.add("jobs", "no %s job", id)
		} else if w.Jobs[id].Permissions == nil {
			p.add("job "+id, "no permissions of its own: the release's jobs each state exactly what they get")
		}
	}
	if j := w.Jobs[SignJob]; j != nil && !slices.Contains(j.Needs, BuildJob) {
		p.add("job "+SignJob, "does not need %s: it must sign what the build produced", BuildJob)
	}
	if j := w.Jobs[PublishJob]; j != nil && !slices.Contains(j.Needs, SignJob) {
		p.add("job "+PublishJob, "does not need %s: it must publish only what was signed", SignJob)
	}

	// Who may hold what: the OIDC token only in sign, contents: write
	// only in publish, and no other write anywhere.
	allowed := map[string]map[string]string{
		SignJob:    {"id-token": "write", "actions": "read"},
		PublishJob: {"contents": "write", "actions": "read"},
	}
	required := map[string][2]string{SignJob: {"id-token", "write"}, PublishJob: {"contents", "write"}}
	for _, id := range w.jobOrder {
		j, where := w.Jobs[id], "job "+id
		perms := j.Permissions
		if perms == nil {
			perms = w.Permissions
		}
		if perms == nil {
			perms = &Permissions{}
		}
		if a, ok := allowed[id]; ok {
			for s, v := range perms.Scopes {
				if v != "none" && a[s] != v {
					p.add(where, "permissions %s: %s: this job may hold only %s", s, v, describe(a))
				}
			}
			if r := required[id]; perms.Scopes[r[0]] != r[1] {
				p.add(where, "needs permissions %s: %s", r[0], r[1])
			}
		} else {
			for s, v := range perms.Scopes {
				if v == "write" || s == "id-token" && v != "none" {
					p.add(where, "permissions %s: %s: only %s signs (id-token) and only %s writes (contents)", s, v, SignJob, PublishJob)
				}
			}
		}

		for _, s := range j.Steps {
			sw := stepWhere(where, &s)
			if a := s.action(); a == "actions/cache" || strings.HasPrefix(a, "actions/cache/") {
				p.add(sw, "%s: a release restores no Actions cache", s.Uses)
			}
			if v, ok := s.with("cache"); ok && v != "false" {
				p.add(sw, "cache: %s: a release restores no Actions cache", v)
			}
			if s.action() == "actions/setup-go" {
				if v, _ := s.with("cache"); v != "false" {
					p.add(sw, "actions/setup-go caches by default: set cache: false")
				}
			}
			if download.MatchString(s.Run) && !(strings.Contains(s.Run, "sha256sum -c") && hasDigest(&s, j)) {
				p.add(sw, "downloads with curl/wget without checking a pinned sha256 (sha256sum -c)")
			}
		}
	}

	if j := w.Jobs[BuildJob]; j != nil {
		checkBuild(p, j)
	}
	for id, act := range map[string]*regexp.Regexp{
		SignJob:    regexp.MustCompile(`cosign\s+sign-blob\b`),
		PublishJob: regexp.MustCompile(`\bgh\s+release\s+(create|upload)\b`),
	} {
		if j := w.Jobs[id]; j != nil {
			checkCredentialed(p, id, j, act)
		}
	}
}

func describe(a map[string]string) string {
	var l []string
	for s, v := range a {
		l = append(l, s+": "+v)
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

func hasDigest(s *Step, j *Job) bool {
	if hexDigest.MatchString(s.text()) {
		return true
	}
	var env struct {
		Env map[string]string `yaml:"env"`
	}
	_ = j.node.Decode(&env)
	for _, v := range env.Env {
		if hexDigest.MatchString(v) {
			return true
		}
	}
	return false
}

func checkReleaseTriggers(p *problems, w *Workflow) {
	if w.On.Kind != yaml.MappingNode {
		p.add("on", "must be push: tags: %s and nothing else", strings.Join(ReleaseTags, ", "))
		return
	}
	on := mappingKeys(&w.On)
	for ev := range on {
		if ev != "push" {
			p.add("on", "%s: the release runs only on push of a release tag", ev)
		}
	}
	push := mappingKeys(on["push"])
	for k := range push {
		if k != "tags" {
			p.add("on.push", "%s: the release filters on tags only", k)
		}
	}
	var tags []string
	if t := push["tags"]; t != nil {
		if err := t.Decode(&tags); err != nil {
			p.add("on.push.tags", "not a list: %v", err)
		}
	}
	got, want := slices.Clone(tags), slices.Clone(ReleaseTags)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		p.add("on.push.tags", "%v: must be exactly %v", tags, ReleaseTags)
	}
}

// checkBuild: the job that builds holds no credentials.
func checkBuild(p *problems, j *Job) {
	where := "job " + BuildJob
	if j.Environment != "" {
		p.add(where, "environment %s: the build must not reach an environment's secrets", j.Environment)
	}
	text, _ := yaml.Marshal(&j.node)
	for _, cred := range []string{"secrets.", "github.token", "GITHUB_TOKEN"} {
		if strings.Contains(string(text), cred) {
			p.add(where, "mentions %s: the build holds no credentials", cred)
		}
	}
	for _, s := range j.Steps {
		if s.action() == "actions/checkout" {
			if v, _ := s.with("persist-credentials"); v != "false" {
				p.add(stepWhere(where, &s), "actions/checkout must set persist-credentials: false (no token left in .git/config)")
			}
		}
	}
}

// checkCredentialed: sign and publish run under the release environment,
// run no build tool and check SHA256SUMS before they sign or publish.
func checkCredentialed(p *problems, id string, j *Job, act *regexp.Regexp) {
	where := "job " + id
	if j.Environment != ReleaseEnvironment {
		p.add(where, "environment %q: must run in the protected %q environment", string(j.Environment), ReleaseEnvironment)
	}
	var script strings.Builder
	for _, s := range j.Steps {
		sw := stepWhere(where, &s)
		switch a := s.action(); {
		case a == "":
		case a == "actions/checkout":
			p.add(sw, "checks out the repository: %s must not", id)
		case a == "actions/download-artifact" || a == "actions/upload-artifact":
		default:
			p.add(sw, "uses %s: %s may only move artifacts (download-artifact, upload-artifact)", a, id)
		}
		if m := buildTool.FindStringSubmatch(s.Run); m != nil {
			p.add(sw, "runs %s: %s runs no build tool", m[2], id)
		}
		script.WriteString(s.Run + "\n")
	}
	all := script.String()
	check := sumsCheck.FindStringIndex(all)
	do := act.FindStringIndex(all)
	switch {
	case do == nil:
		p.add(where, "never runs %s", act)
	case check == nil:
		p.add(where, "does not run sha256sum -c SHA256SUMS")
	case check[0] > do[0]:
		p.add(where, "runs sha256sum -c SHA256SUMS only after %s", act)
	}
}
