package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/sdk/template"
)

// E2B's template build trigger (POST /v2/templates/{id}/builds/{buildID},
// TemplateBuildStartV2) as the gateway reads it.
type buildStartReq struct {
	Force             *bool           `json:"force"`
	FromImage         *string         `json:"fromImage"`
	FromImageRegistry json.RawMessage `json:"fromImageRegistry"`
	FromTemplate      *string         `json:"fromTemplate"`
	ReadyCmd          *string         `json:"readyCmd"`
	StartCmd          *string         `json:"startCmd"`
	Steps             []buildStepReq  `json:"steps"`
}

// buildStepReq is one TemplateStep. forceUpload, resolveSymlinks and gzip
// are the SDK's own (it sends its instruction objects whole); force is
// E2B's layer cache, which Rayito's builds do not have.
type buildStepReq struct {
	Type            string   `json:"type"`
	Args            []string `json:"args"`
	FilesHash       *string  `json:"filesHash"`
	Force           *bool    `json:"force"`
	ForceUpload     *bool    `json:"forceUpload"`
	ResolveSymlinks *bool    `json:"resolveSymlinks"`
	Gzip            *bool    `json:"gzip"`
}

// ErrTemplateStep is what every refusal of the step translator matches
// (a *TemplateStepError).
var ErrTemplateStep = errors.New("e2b: template build refused")

// TemplateStepError is a template build the gateway cannot map onto a
// Rayito template: Step is E2B's step name ("base" for the base,
// "finalize" for the start and ready commands, else the 1-based index of
// the step), Type its kind, never a value.
type TemplateStepError struct {
	Step, Type, Reason string
}

func (e *TemplateStepError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("template step %s (%s): %s", e.Step, e.Type, e.Reason)
	}
	return fmt.Sprintf("template step %s: %s", e.Step, e.Reason)
}

// Is matches ErrTemplateStep.
func (e *TemplateStepError) Is(target error) bool { return target == ErrTemplateStep }

// E2B's step names of the base and of the start/ready commands.
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// waitForPortRe is the ready command E2B's waitForPort(port) generates:
// `[ -n "$(ss -Htuln sport = :PORT)" ]`.
var waitForPortRe = regexp.MustCompile(`^\[ -n "\$\(ss -Htuln sport = :([0-9]{1,5})\)" \]$`)

// hashRe is E2B's files hash: a hex sha256.
var hashRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// buildPlan is an E2B build translated: the template (steps of the
// sdk/template builder), the E2B step of each of its spec steps, and the
// files hashes its COPY steps need (each extracted under <hash>/ of the
// build context).
type buildPlan struct {
	tmpl   *template.Template
	e2b    []string // spec step index -> E2B step name
	hashes []string // distinct, in order
	force  bool
}

// baseCheck says whether a fromTemplate or fromImage is a base the gateway
// builds on (nil), or why not.
type baseCheck func(kind, name string) error

// translateBuild maps an E2B build onto a Rayito template. Every refusal
// is a *TemplateStepError naming the step.
func translateBuild(req *buildStartReq, base baseCheck) (*buildPlan, error) {
	if err := checkBuildBase(req, base); err != nil {
		return nil, err
	}
	if len(req.Steps) > ptemplate.MaxSteps/2 {
		return nil, refuse(stepBase, "", "at most %d steps", ptemplate.MaxSteps/2)
	}
	// E2B's defaults, not Docker's: steps run as "user" in /home/user.
	tr := &buildTranslator{
		p:    &buildPlan{force: req.Force != nil && *req.Force, e2b: []string{stepBase, stepBase}},
		t:    template.FromBaseImage(localBase).SetUser(template.UserUser).Workdir("/home/user"),
		user: template.UserUser, workdir: "/home/user", seen: map[string]bool{},
	}
	for i, st := range req.Steps {
		if err := tr.step(strconv.Itoa(i+1), st); err != nil {
			return nil, err
		}
	}
	if err := tr.startCmd(req); err != nil {
		return nil, err
	}
	if err := tr.t.Err(); err != nil {
		return nil, builderRefusal(err, tr.p.e2b)
	}
	tr.p.tmpl = tr.t
	return tr.p, nil
}

// refuse is a *TemplateStepError of step (of type typ).
func refuse(step, typ, format string, args ...any) error {
	return &TemplateStepError{Step: step, Type: typ, Reason: fmt.Sprintf(format, args...)}
}

// checkBuildBase checks that req builds on exactly one base, image or
// template, that base accepts, and without registry credentials.
func checkBuildBase(req *buildStartReq, base baseCheck) error {
	if present(req.FromImageRegistry) {
		return refuse(stepBase, "", "fromImageRegistry (registry credentials) is not supported by Rayito's E2B gateway")
	}
	hasImage := req.FromImage != nil && *req.FromImage != ""
	hasTmpl := req.FromTemplate != nil && *req.FromTemplate != ""
	switch {
	case hasImage == hasTmpl:
		return refuse(stepBase, "", "exactly one of fromImage and fromTemplate must be given")
	case hasImage:
		if err := base("image", *req.FromImage); err != nil {
			return refuse(stepBase, "", "%s", err.Error())
		}
	default:
		if err := base("template", *req.FromTemplate); err != nil {
			return refuse(stepBase, "", "%s", err.Error())
		}
	}
	return nil
}

// buildTranslator translates an E2B build's steps one by one: the plan
// so far, the template, the current user and workdir, and the files
// hashes seen.
type buildTranslator struct {
	p             *buildPlan
	t             *template.Template
	user, workdir string
	seen          map[string]bool
}

// add makes n the template, a Rayito step of the E2B step named step.
func (tr *buildTranslator) add(n *template.Template, step string) {
	tr.t = n
	tr.p.e2b = append(tr.p.e2b, step)
}

// step translates the E2B step named name.
func (tr *buildTranslator) step(name string, st buildStepReq) error {
	typ := st.Type
	if !plainStepType(typ) {
		typ = "?"
	}
	if st.FilesHash != nil && st.Type != "COPY" {
		return refuse(name, typ, "filesHash is only for COPY steps")
	}
	switch st.Type {
	case "RUN":
		return tr.run(name, typ, st)
	case "COPY":
		return tr.copy(name, typ, st)
	case "ENV":
		if len(st.Args) == 0 || len(st.Args)%2 != 0 {
			return refuse(name, typ, "ENV takes name and value pairs")
		}
		envs := make(map[string]string, len(st.Args)/2)
		for j := 0; j < len(st.Args); j += 2 {
			envs[st.Args[j]] = st.Args[j+1]
		}
		tr.add(tr.t.SetEnvs(envs), name)
	case "WORKDIR":
		if len(st.Args) != 1 || st.Args[0] == "" || strings.ContainsRune(st.Args[0], 0) {
			return refuse(name, typ, "WORKDIR takes a directory")
		}
		dir := st.Args[0]
		if !strings.HasPrefix(dir, "/") {
			dir = path.Join(tr.workdir, dir)
		}
		dir = path.Clean(dir)
		tr.workdir = dir
		tr.add(tr.t.Workdir(dir), name)
	case "USER":
		if len(st.Args) != 1 || !rayitoUser(st.Args[0]) {
			return refuse(name, typ, "user must be root or user (Rayito's two accounts)")
		}
		tr.user = st.Args[0]
		tr.add(tr.t.SetUser(tr.user), name)
	default:
		return refuse(name, typ, "this step kind is not supported by Rayito's E2B gateway (RUN, COPY, ENV, WORKDIR and USER are)")
	}
	return nil
}

// run translates a RUN step (as another user when it names one).
func (tr *buildTranslator) run(name, typ string, st buildStepReq) error {
	if len(st.Args) < 1 || len(st.Args) > 2 || st.Args[0] == "" {
		return refuse(name, typ, "RUN takes a command and an optional user")
	}
	runAs := tr.user
	if len(st.Args) == 2 && st.Args[1] != "" {
		runAs = st.Args[1]
	}
	if !rayitoUser(runAs) {
		return refuse(name, typ, "user must be root or user (Rayito's two accounts)")
	}
	if runAs != tr.user {
		tr.add(tr.t.SetUser(runAs), name)
	}
	tr.add(tr.t.RunCmd(st.Args[0]), name)
	if runAs != tr.user {
		tr.add(tr.t.SetUser(tr.user), name)
	}
	return nil
}

// copy translates a COPY step: the files of its hash, relative to the
// workdir, owned by its user.
func (tr *buildTranslator) copy(name, typ string, st buildStepReq) error {
	if st.FilesHash == nil || !hashRe.MatchString(*st.FilesHash) {
		return refuse(name, typ, "COPY needs a filesHash (64 hex digits)")
	}
	if len(st.Args) < 2 || len(st.Args) > 4 {
		return refuse(name, typ, "COPY takes a source, a destination, a user and a mode")
	}
	src, dst := st.Args[0], st.Args[1]
	owner, mode := "", ""
	if len(st.Args) > 2 {
		owner = st.Args[2]
	}
	if len(st.Args) > 3 {
		mode = st.Args[3]
	}
	if mode != "" {
		return refuse(name, typ, "a copy's mode is not supported by Rayito's E2B gateway (change it with a RUN step)")
	}
	if owner == "" {
		owner = tr.user
	}
	if !rayitoUser(owner) {
		return refuse(name, typ, "user must be root or user (Rayito's two accounts)")
	}
	clean, ok := copySource(src)
	if !ok {
		return refuse(name, typ, "the source must be a relative path inside the context, without glob characters")
	}
	if dst == "" || strings.ContainsRune(dst, 0) {
		return refuse(name, typ, "the destination must be a path")
	}
	if !strings.HasPrefix(dst, "/") {
		// Relative to the workdir, as in a Dockerfile.
		slash := strings.HasSuffix(dst, "/")
		dst = path.Join(tr.workdir, dst)
		if slash && dst != "/" {
			dst += "/"
		}
	}
	h := *st.FilesHash
	if !tr.seen[h] {
		tr.seen[h] = true
		tr.p.hashes = append(tr.p.hashes, h)
	}
	cs := h
	if clean != "." {
		cs = h + "/" + clean
	}
	tr.add(tr.t.Copy(cs, dst, template.WithOwner(owner)), name)
	return nil
}

// startCmd sets the template's start command and the port its ready
// command waits for (waitForPort only).
func (tr *buildTranslator) startCmd(req *buildStartReq) error {
	start, ready := "", ""
	if req.StartCmd != nil {
		start = *req.StartCmd
	}
	if req.ReadyCmd != nil {
		ready = *req.ReadyCmd
	}
	switch {
	case start == "" && ready != "":
		return refuse(stepFinalize, "", "a ready command without a start command is not supported by Rayito's E2B gateway")
	case start != "":
		port := 0
		if ready != "" {
			m := waitForPortRe.FindStringSubmatch(ready)
			if m == nil {
				return refuse(stepFinalize, "", "only waitForPort(port) ready commands are supported by Rayito's E2B gateway")
			}
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 || n > 65535 {
				return refuse(stepFinalize, "", "the ready port must be between 1 and 65535")
			}
			port = n
		}
		tr.t = tr.t.SetStartCmd(start, port)
	}
	return nil
}

// builderRefusal turns sdk/template's first mistake into a refusal naming
// the E2B step (its reason never carries a value).
func builderRefusal(err error, e2b []string) error {
	var te *template.Error
	if !errors.As(err, &te) {
		return &TemplateStepError{Step: stepBase, Reason: "the template is invalid"}
	}
	step := stepFinalize
	if te.Step >= 0 && te.Step < len(e2b) {
		step = e2b[te.Step]
	}
	return &TemplateStepError{Step: step, Reason: te.Field + " " + te.Reason}
}

// e2bStepOf is the E2B step of a Rayito spec step (platform failures).
func (p *buildPlan) e2bStepOf(i int) string {
	if i >= 0 && i < len(p.e2b) {
		return p.e2b[i]
	}
	return stepFinalize
}

// localBase is the only base the local platform builds on.
const localBase = "local"

func rayitoUser(u string) bool { return u == template.UserRoot || u == template.UserUser }

// plainStepType: a step type safe to echo in a message.
func plainStepType(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// copySource cleans a COPY source as E2B's SDK names it (relative to the
// context; "./x" is "x"): no glob, no "..", not absolute.
func copySource(src string) (string, bool) {
	if src == "" || strings.HasPrefix(src, "/") || strings.ContainsAny(src, "*?[]{}\\\x00") {
		return "", false
	}
	c := path.Clean(src)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	if c != "." && !ptemplate.ValidSrc(c) {
		return "", false
	}
	return c, true
}
