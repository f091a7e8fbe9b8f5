package auth

// NoCache makes the verifier check every token in full, for benchmarks
// of the full verification.
func (o *OIDC) NoCache() { o.nocache = true }
