package rayito_test

import (
	"context"
	"fmt"
	"log"
	"os"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Clone a private repository with a token, commit on a branch and push
// it. The token serves each of those two commands only: it is never
// written to the clone's config, its remote URL or an error. (tests'
// TestGit runs these calls against a real git server.)
func ExampleGit() {
	ctx := context.Background()
	sbx, err := rayito.Create(ctx, rayito.WithBackend(rayito.BackendLocal))
	if err != nil {
		log.Fatal(err)
	}
	defer sbx.Kill(ctx)

	token := rayito.WithGitCredentials("x-access-token", os.Getenv("GIT_TOKEN"))
	if _, err := sbx.Git.Clone(ctx, "https://git.example.com/acme/app.git", "app", token); err != nil {
		log.Fatal(err) // errors.Is(err, rayito.ErrGitAuth) for a refused token
	}
	if err := sbx.Git.ConfigureUser(ctx, "Agent", "agent@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := sbx.Git.CreateBranch(ctx, "app", "agent/fix"); err != nil {
		log.Fatal(err)
	}
	if _, err := sbx.Files.Write(ctx, "app/FIX.md", []byte("fixed\n")); err != nil {
		log.Fatal(err)
	}
	if _, err := sbx.Git.Add(ctx, "app"); err != nil {
		log.Fatal(err)
	}
	if _, err := sbx.Git.Commit(ctx, "app", "Fix it"); err != nil {
		log.Fatal(err)
	}
	if _, err := sbx.Git.Push(ctx, "app", token, rayito.WithSetUpstream()); err != nil {
		log.Fatal(err) // rayito.ErrGitConflict when the remote moved on
	}
	st, err := sbx.Git.Status(ctx, "app")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Branch, st.Upstream, st.Clean())
}
