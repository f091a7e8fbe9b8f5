package httpapi

// BuildOpenAPI is buildOpenAPI, for the tests.
var BuildOpenAPI = buildOpenAPI

// Patterns returns the routes the server serves.
func (s *Server) Patterns() []string { return s.patterns }
