package postgres

// Trace hands every statement the store's connections run, with its
// arguments, to f (a batch's as it is read back); nil stops. Set it before
// the store is used concurrently.
func (s *Store) Trace(f func(query string, args []any)) { s.count.trace = f }
