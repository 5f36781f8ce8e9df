package merger

// composeCall is one compose of a file's tree: srcs, in order, into dst;
// the tree's last call has dst "" (the file's final object, whose options
// composeFinal sets).
type composeCall struct {
	dst  string
	srcs []string
}

// composeTree plans the composes that make one object of srcs (a file's
// chunks in order, then its seek table), at most fanIn sources a call, in
// the fewest levels: while a level has more than fanIn objects, they are
// composed in runs of fanIn into the objects intermediate(level, k) names,
// which the next level composes; the last level is one call into the final
// object. Level i's calls may run at once; level i+1 reads what they made.
// A file of n chunks takes ceil(log_fanIn(n)) levels (one at least) and
// about n/(fanIn-1) calls.
func composeTree(srcs []string, fanIn int, intermediate func(level, k int) string) [][]composeCall {
	var levels [][]composeCall
	for level := 0; ; level++ {
		if len(srcs) <= fanIn {
			return append(levels, []composeCall{{srcs: srcs}})
		}
		calls := make([]composeCall, 0, (len(srcs)+fanIn-1)/fanIn)
		next := make([]string, 0, cap(calls))
		for lo := 0; lo < len(srcs); lo += fanIn {
			dst := intermediate(level, len(calls))
			calls = append(calls, composeCall{dst: dst, srcs: srcs[lo:min(lo+fanIn, len(srcs))]})
			next = append(next, dst)
		}
		levels = append(levels, calls)
		srcs = next
	}
}
