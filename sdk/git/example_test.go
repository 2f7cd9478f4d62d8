package git_test

import (
	"context"
	"fmt"
	"log"
	"os"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/git"
)

// Clone a private repository with a token, commit on a branch and push
// it. The token serves each of those two commands only: it is never
// written to the clone's config, its remote URL or an error. (tests'
// TestGit runs these calls against a real git server.)
func ExampleNew() {
	ctx := context.Background()
	sbx, err := rayito.Create(ctx, rayito.WithBackend(rayito.BackendLocal))
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)
	g := git.New(sbx)

	token := git.WithCredentials("x-access-token", os.Getenv("GIT_TOKEN"))
	if _, err := g.Clone(ctx, "https://git.example.com/acme/app.git", "app", token); err != nil {
		log.Fatal(err) // errors.Is(err, git.ErrAuth) for a refused token
	}
	if err := g.ConfigureUser(ctx, "Agent", "agent@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := g.CreateBranch(ctx, "app", "agent/fix"); err != nil {
		log.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "app/FIX.md", []byte("fixed\n")); err != nil {
		log.Fatal(err)
	}
	if _, err := g.Add(ctx, "app"); err != nil {
		log.Fatal(err)
	}
	if _, err := g.Commit(ctx, "app", "Fix it"); err != nil {
		log.Fatal(err)
	}
	if _, err := g.Push(ctx, "app", token, git.WithSetUpstream()); err != nil {
		log.Fatal(err) // git.ErrConflict when the remote moved on
	}
	st, err := g.Status(ctx, "app")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Branch, st.Upstream, st.Clean())
}
