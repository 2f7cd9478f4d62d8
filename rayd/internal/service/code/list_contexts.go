package code

import (
	"cmp"
	"context"
	"slices"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// ListContexts lists the contexts in the order they were made, the
// default contexts of defaultLanguages first: those whose kernels are
// installed are there from the start (made here if no cell made them yet;
// their kernels start on first use); other default contexts once used.
func (s *Service) ListContexts(ctx context.Context, _ *connect.Request[raydv1.ListContextsRequest]) (*connect.Response[raydv1.ListContextsResponse], error) {
	if _, err := s.boot(); err != nil {
		return nil, err
	}
	for _, l := range defaultLanguages {
		if _, err := s.kernelArgv(ctx, l); err == nil {
			// At the cap of contexts it is just not listed.
			_, _ = s.defaultContext(l)
		}
	}
	s.mu.Lock()
	ccs := make([]*codeContext, 0, len(s.contexts))
	for _, cc := range s.contexts {
		ccs = append(ccs, cc)
	}
	s.mu.Unlock()
	slices.SortFunc(ccs, func(a, b *codeContext) int { return cmp.Compare(listRank(a), listRank(b)) })
	out := make([]*raydv1.CodeContext, 0, len(ccs))
	for _, cc := range ccs {
		out = append(out, cc.info())
	}
	return connect.NewResponse(&raydv1.ListContextsResponse{Contexts: out}), nil
}

// listRank orders the list: the default contexts of defaultLanguages as
// if made at the start, in that order, then the others as they were made.
func listRank(cc *codeContext) uint64 {
	for i, l := range defaultLanguages {
		if cc.id == defaultID(l) {
			return uint64(i)
		}
	}
	return uint64(len(defaultLanguages)) + cc.seq
}
