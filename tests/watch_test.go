package tests

import (
	"context"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestFilesWatch(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	sbx := p.create(ctx)
	defer sbx.Kill(ctx)
	if _, err := sbx.Files.MakeDir(ctx, "watched"); err != nil {
		t.Fatal(err)
	}
	w, err := sbx.Files.Watch(ctx, "watched", rayito.Recursive())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := sbx.Files.Write(ctx, "watched/f.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Commands.Run(ctx, "mkdir -p ~/watched/sub && sleep 0.2 && echo y > ~/watched/sub/g.txt"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	events := make(chan rayito.FileEvent)
	go func() {
		for {
			ev, err := w.Next()
			if err != nil {
				close(events)
				return
			}
			events <- ev
		}
	}()
	for !(seen["f.txt"] && seen["sub/g.txt"]) {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended early; saw %v", seen)
			}
			if len(ev.Name) > 0 && ev.Name[0] == '.' {
				t.Fatalf("temp file reported: %+v", ev)
			}
			seen[ev.Name] = true
		case <-deadline:
			t.Fatalf("events seen: %v", seen)
		}
	}
}
