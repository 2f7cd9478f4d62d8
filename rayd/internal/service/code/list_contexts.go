package code

import (
	"context"
	"slices"
	"strings"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// ListContexts lists the contexts, default ones first, then by id.
// default-python is listed once it exists (started eagerly after /run, or
// on first use).
func (s *Service) ListContexts(_ context.Context, _ *connect.Request[raydv1.ListContextsRequest]) (*connect.Response[raydv1.ListContextsResponse], error) {
	if _, err := s.boot(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]*raydv1.CodeContext, 0, len(s.contexts))
	for _, cc := range s.contexts {
		out = append(out, cc.info())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *raydv1.CodeContext) int {
		da, db := isDefault(a.GetContextId()), isDefault(b.GetContextId())
		if da != db {
			if da {
				return -1
			}
			return 1
		}
		return strings.Compare(a.GetContextId(), b.GetContextId())
	})
	return connect.NewResponse(&raydv1.ListContextsResponse{Contexts: out}), nil
}
