package template_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rayito-dev/rayito/sdk/template"
)

func Example() {
	dir, err := os.MkdirTemp("", "context")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "app.py"), []byte("print('hello')\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, ".env"), []byte("TOKEN=...\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("**/.env\n"), 0o644)

	t := template.FromBaseImage("python:3.12-slim").
		PipInstall("flask").
		Copy("app.py", "/srv/", template.WithOwner(template.UserUser)).
		Workdir("/srv").
		SetUser(template.UserUser).
		SetStartCmd("python3 app.py", 8000)
	a, err := template.Compile(context.Background(), t, dir)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	fmt.Print(a.Dockerfile)
	fmt.Println(a.Files, "file,", len(a.Warnings), "warnings")
	// Output:
	// # The template as a Dockerfile layer, written by rayito's SDK (sdk/template).
	// # COPY sources are under context/ in the template's artifact.
	// FROM python:3.12-slim
	// RUN ["/bin/sh", "-c", "python3 -m pip install --no-cache-dir 'flask'"]
	// COPY --chown=user ["context/app.py", "/srv/app.py"]
	// WORKDIR /srv
	// USER user
	// # rayito start (run by the platform when a sandbox starts; not an instruction): {"cmd":"python3 app.py","ready_port":8000}
	// 1 file, 0 warnings
}

func ExampleFromDockerfile() {
	dir, err := os.MkdirTemp("", "context")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "package.json"), []byte("{}\n"), 0o644)

	t, err := template.FromDockerfile(`FROM node:22
WORKDIR /app
COPY package.json .
RUN npm install
EXPOSE 3000
CMD ["node", "server.js"]
`)
	if err != nil {
		log.Fatal(err)
	}
	a, err := template.Compile(context.Background(), t, dir)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	fmt.Println(a.Spec.Steps[1].Copy.Dst)
	fmt.Println(a.Spec.Start.Cmd, a.Spec.Start.ReadyPort)
	// Output:
	// /app/package.json
	// node server.js 3000
}
