// Package webtest holds the tests of agentplane's web page in a real
// headless Chromium against serve: by keyboard and by mouse, sign-in,
// confirmations, workflows and notifications, a long session, drawing
// errors, hostile names and markdown. It has no code of its own; the tests
// run the binary (internal/testkit/servetest).
package webtest
