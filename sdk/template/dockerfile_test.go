package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

func TestFromDockerfile(t *testing.T) {
	t.Parallel()
	run := func(s string) ptemplate.Step { return ptemplate.Step{Run: s} }
	cp := func(src, dst, owner string) ptemplate.Step {
		return ptemplate.Step{Copy: &ptemplate.Copy{Src: src, Dst: dst, Owner: owner}}
	}
	cases := []struct {
		name  string
		text  string
		base  string
		steps []ptemplate.Step
		start *ptemplate.Start
	}{
		{"the three-line template",
			"FROM python:3.12-slim\nRUN pip install flask\nCMD [\"python3\", \"app.py\"]\n",
			"python:3.12-slim", []ptemplate.Step{run("pip install flask")}, &ptemplate.Start{Cmd: "python3 app.py"}},
		{"BOM, CRLF, comments, blank lines, lower case",
			"\uFEFF# syntax=docker/dockerfile:1\r\n\r\nfrom alpine AS base\r\n# a comment\r\nrun echo hi\r\n",
			"alpine", []ptemplate.Step{run("echo hi")}, nil},
		{"continuations drop comment and blank lines inside",
			"FROM alpine\nRUN apt-get update && \\\n# a comment\n\n    apt-get install -y curl\n",
			"alpine", []ptemplate.Step{run("apt-get update &&     apt-get install -y curl")}, nil},
		{"exec forms",
			"FROM alpine\nRUN [\"/bin/sh\", \"-c\", \"echo $HOME\"]\nRUN [\"echo\", \"it's\", \"a b\", \"\"]\n",
			"alpine", []ptemplate.Step{run("echo $HOME"), run(`echo 'it'\''s' 'a b' ''`)}, nil},
		{"RUN keeps shell variables",
			"FROM alpine\nRUN echo \"$PATH\" ${HOME}\n",
			"alpine", []ptemplate.Step{run(`echo "$PATH" ${HOME}`)}, nil},
		{"COPY forms, chown, relative destinations under WORKDIR",
			"FROM alpine\nWORKDIR /srv\nCOPY --chown=user:user app.py .\nCOPY [\"a\", \"b\", \"lib/\"]\nCOPY /dir sub\nCOPY --chown=0 x /abs/x\n",
			"alpine", []ptemplate.Step{{Workdir: "/srv"}, cp("app.py", "/srv/app.py", "user"), cp("a", "/srv/lib/a", ""), cp("b", "/srv/lib/b", ""), cp("dir", "/srv/sub", ""), cp("x", "/abs/x", "root")}, nil},
		{"ENV forms and quoting",
			"FROM alpine\nENV A=1 B=\"two words\" C='single $x' D=a\\ b E=\nENV LEGACY value with  spaces\nENV Q=\"say \\\"hi\\\" \\$5 \\\\ \\n\"\n",
			"alpine", []ptemplate.Step{
				{Env: map[string]string{"A": "1", "B": "two words", "C": "single $x", "D": "a b", "E": ""}},
				{Env: map[string]string{"LEGACY": "value with  spaces"}},
				{Env: map[string]string{"Q": `say "hi" $5 \ \n`}},
			}, nil},
		{"WORKDIR relative to the last, USER accounts",
			"FROM alpine\nWORKDIR /a\nWORKDIR b/c\nWORKDIR ..\nUSER user\nUSER 0:0\nUSER 1000\n",
			"alpine", []ptemplate.Step{{Workdir: "/a"}, {Workdir: "/a/b/c"}, {Workdir: "/a/b"}, {User: "user"}, {User: "root"}, {User: "user"}}, nil},
		{"EXPOSE gives the ready port",
			"FROM node\nEXPOSE 53/udp 3000-3005 8080/tcp 9090\nCMD node server.js\n",
			"node", []ptemplate.Step{}, &ptemplate.Start{Cmd: "node server.js", ReadyPort: 8080}},
		{"the ready-port comment wins",
			"FROM node\n# rayito: ready-port=3000\nEXPOSE 8080\nCMD node server.js\n",
			"node", []ptemplate.Step{}, &ptemplate.Start{Cmd: "node server.js", ReadyPort: 3000}},
		{"EXPOSE without a command is no start",
			"FROM node\nEXPOSE 8080\n",
			"node", []ptemplate.Step{}, nil},
		{"exec ENTRYPOINT takes CMD's words",
			"FROM alpine\nENTRYPOINT [\"tini\", \"--\"]\nCMD [\"server\", \"--port\", \"80\"]\n",
			"alpine", []ptemplate.Step{}, &ptemplate.Start{Cmd: "tini -- server --port 80"}},
		{"exec ENTRYPOINT with a shell CMD",
			"FROM alpine\nENTRYPOINT [\"tini\"]\nCMD serve now\n",
			"alpine", []ptemplate.Step{}, &ptemplate.Start{Cmd: "tini /bin/sh -c 'serve now'"}},
		{"shell ENTRYPOINT ignores CMD",
			"FROM alpine\nCMD ignored\nENTRYPOINT exec server\n",
			"alpine", []ptemplate.Step{}, &ptemplate.Start{Cmd: "exec server"}},
		{"the last CMD wins",
			"FROM alpine\nCMD first\nCMD second\n",
			"alpine", []ptemplate.Step{}, &ptemplate.Start{Cmd: "second"}},
		{"a malformed JSON form is the shell form",
			"FROM alpine\nRUN [not json\n",
			"alpine", []ptemplate.Step{run("[not json")}, nil},
		{"a trailing continuation at the end",
			"FROM alpine\nRUN echo \\",
			"alpine", []ptemplate.Step{run("echo")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmpl, err := FromDockerfile(tc.text)
			if err != nil {
				t.Fatalf("FromDockerfile: %v", err)
			}
			s := specOf(tmpl)
			if s.Base != tc.base || !reflect.DeepEqual(s.Steps, tc.steps) || !reflect.DeepEqual(s.Start, tc.start) {
				t.Fatalf("spec = %s\nwant base %s steps %s start %s", jsonValue(s), tc.base, jsonValue(tc.steps), jsonValue(tc.start))
			}
		})
	}
}

func TestFromDockerfileRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text  string
		line  int
		instr string
	}{
		{"", 0, "FROM"},
		{"# only a comment\n", 0, "FROM"},
		{"RUN echo\nFROM alpine\n", 1, "RUN"},
		{"FROM alpine\nADD https://example.com/x /x\n", 2, "ADD"},
		{"ARG V=1\nFROM alpine:${V}\n", 1, "ARG"},
		{"FROM alpine\nONBUILD RUN x\n", 2, "ONBUILD"},
		{"FROM alpine\nHEALTHCHECK CMD true\n", 2, "HEALTHCHECK"},
		{"FROM alpine\nVOLUME /data\n", 2, "VOLUME"},
		{"FROM alpine\nLABEL a=b\n", 2, "LABEL"},
		{"FROM alpine\nSHELL [\"/bin/bash\", \"-c\"]\n", 2, "SHELL"},
		{"FROM golang AS build\nRUN go build\nFROM alpine\n", 3, "FROM"},
		{"FROM --platform=linux/amd64 alpine\n", 1, "FROM"},
		{"FROM alpine extra\n", 1, "FROM"},
		{"FROM $BASE\n", 1, "FROM"},
		{"FROM alpine\nCOPY --from=build /app /app\n", 2, "COPY"},
		{"FROM alpine\nCOPY --chmod=755 a /a\n", 2, "COPY"},
		{"FROM alpine\nCOPY --chown=nobody a /a\n", 2, "COPY"},
		{"FROM alpine\nCOPY --chown=user:root a /a\n", 2, "COPY"},
		{"FROM alpine\nCOPY https://example.com/x /x\n", 2, "COPY"},
		{"FROM alpine\nCOPY *.py /app/\n", 2, "COPY"},
		{"FROM alpine\nCOPY a b /dir\n", 2, "COPY"},
		{"FROM alpine\nCOPY onlyone\n", 2, "COPY"},
		{"FROM alpine\nCOPY ../outside /x\n", 2, "COPY"},
		{"FROM alpine\nCOPY $SRC /x\n", 2, "COPY"},
		{"FROM alpine\nCOPY [\"a\", \"/x$y\"]\n", 2, "COPY"},
		{"FROM alpine\nCOPY <<EOF /x\nhello\nEOF\n", 2, "COPY"},
		{"FROM alpine\nRUN <<EOF\necho hi\nEOF\n", 2, "RUN"},
		{"FROM alpine\nRUN --mount=type=cache,target=/root/.cache pip install x\n", 2, "RUN"},
		{"FROM alpine\nRUN []\n", 2, "RUN"},
		{"FROM alpine\nENV PATH=/opt/bin:$PATH\n", 2, "ENV"},
		{"FROM alpine\nENV 1BAD=x\n", 2, "ENV"},
		{"FROM alpine\nENV A=\"unterminated\n", 2, "ENV"},
		{"FROM alpine\nENV ONLYKEY\n", 2, "ENV"},
		{"FROM alpine\nENV A=line1 =x\n", 2, "ENV"},
		{"FROM alpine\nWORKDIR $HOME\n", 2, "WORKDIR"},
		{"FROM alpine\nWORKDIR\n", 2, "WORKDIR"},
		{"FROM alpine\nUSER nobody\n", 2, "USER"},
		{"FROM alpine\nUSER root user\n", 2, "USER"},
		{"FROM alpine\nEXPOSE http\n", 2, "EXPOSE"},
		{"FROM alpine\nEXPOSE 70000\n", 2, "EXPOSE"},
		{"FROM alpine\nEXPOSE 80/quic\n", 2, "EXPOSE"},
		{"FROM alpine\n\n# rayito: ready-port=8080\n", 3, "# rayito: ready-port"},
		{"FROM alpine\n# rayito: ready-port=http\nCMD x\n", 2, "# rayito: ready-port"},
		{"# escape=`\nFROM alpine\n", 1, "# escape"},
		{"FROM alpine\nCMD []\n", 2, "CMD"},
		{"FROM alpine\nRUN echo \x00\n", 2, "RUN"},
		{"FROM alpine\n" + strings.Repeat("RUN true\n", ptemplate.MaxSteps+1), ptemplate.MaxSteps + 2, "RUN"},
		{"FROM alpine\nRUN " + strings.Repeat("x", ptemplate.MaxRunLen+1) + "\n", 2, "RUN"},
		{"FROM alpine\nRUN " + strings.Repeat("x", MaxDockerfileLen) + "\n", 0, ""},
		{"FROM alpine\n\xff\n", 0, ""},
		{"FROM alpine\nrun-this\n", 2, ""},
		{"AKIA-secret-looking first line\nFROM alpine\n", 1, ""},
		{"FROM alpine\nsecretvalue123 x\n", 2, ""},
	}
	for _, tc := range cases {
		_, err := FromDockerfile(tc.text)
		var e *Error
		if !errors.Is(err, ErrDockerfile) || !errors.As(err, &e) || e.Line != tc.line || e.Field != tc.instr {
			short := tc.text
			if len(short) > 60 {
				short = short[:60]
			}
			t.Errorf("FromDockerfile(%q): err = %v (%+v); want line %d instruction %q", short, err, e, tc.line, tc.instr)
		}
	}
}

// TestFromDockerfileCompiles: a Dockerfile-made template compiles with a
// context, its Dockerfile layer rendering the same steps.
func TestFromDockerfileCompiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"app/main.py": "print(1)\n", "requirements.txt": "flask\n"})
	tmpl, err := FromDockerfile("FROM python:3.12\nCOPY requirements.txt /srv/\nCOPY app /srv/app\nRUN pip install -r /srv/requirements.txt\nWORKDIR /srv/app\nUSER user\nEXPOSE 5000\nCMD [\"python3\", \"main.py\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Compile(t.Context(), tmpl, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := `FROM python:3.12
COPY ["context/requirements.txt", "/srv/requirements.txt"]
COPY ["context/app", "/srv/app"]
RUN ["/bin/sh", "-c", "pip install -r /srv/requirements.txt"]
WORKDIR /srv/app
USER user
# rayito start (run by the platform when a sandbox starts; not an instruction): {"cmd":"python3 main.py","ready_port":5000}
`
	if !strings.HasSuffix(a.Dockerfile, want) {
		t.Errorf("Dockerfile:\n%s\nwant it to end with\n%s", a.Dockerfile, want)
	}
}

func FuzzFromDockerfile(f *testing.F) {
	for _, s := range []string{
		"FROM python:3.12-slim\nRUN pip install flask\nCMD [\"python3\", \"app.py\"]\n",
		"\uFEFFFROM alpine AS x\nWORKDIR app\nCOPY --chown=user a b ./\nENV A=1 B=\"x y\" C='z'\nENV L v w\nUSER user\nEXPOSE 80/tcp\nENTRYPOINT [\"tini\"]\nCMD run\n",
		"FROM alpine\nRUN a \\\n# c\n  b\n# rayito: ready-port=1\nCMD [\"x\"]\n",
		"FROM alpine\nCOPY [\"a\", \"/b\"]\nRUN [\"sh\", \"-c\", \"x\"]\n",
		"FROM alpine\nENV A=\"\\\"\\\\\\$\"\n",
		"FROM a\nADD x y\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		tmpl, err := FromDockerfile(text)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrDockerfile) || !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := tmpl.Err(); err != nil {
			t.Fatalf("accepted with recorded mistakes: %v", err)
		}
		s := specOf(tmpl)
		b, err := ptemplate.Encode(s)
		if err != nil {
			t.Fatalf("accepted but the spec does not encode: %v", err)
		}
		d, err := ptemplate.Decode(b)
		if err != nil {
			t.Fatalf("accepted but Decode refuses the spec: %v", err)
		}
		if !reflect.DeepEqual(d, s) {
			t.Fatalf("the spec changed through JSON:\n%+v\n%+v", d, s)
		}
		df := renderDockerfile(s)
		if !strings.HasPrefix(df, "# ") || strings.Count(df, "\nFROM ") != 1 {
			t.Fatalf("Dockerfile layer:\n%s", df)
		}
		for _, line := range strings.Split(strings.TrimSuffix(df, "\n"), "\n") {
			kw, _ := firstWord(line)
			switch kw {
			case "#", "FROM", "RUN", "COPY", "ENV", "WORKDIR", "USER":
			default:
				t.Fatalf("the Dockerfile layer has a line %q", line)
			}
		}
	})
}
