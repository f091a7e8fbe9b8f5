package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// agentplane workflow run → approve, in separate processes' worth of
// runs over one database: the approval's id comes from the first run's
// output, a wrong one is refused, the right one finishes the workflow.
func TestWorkflowCLI(t *testing.T) {
	env := map[string]string{"AGENTPLANE_DB": filepath.Join(t.TempDir(), "w.db")}
	out, errOut, code := runEnv(t, env, "", "workflow", "run", "--mode", "sales", "../../examples/workflows/outreach.yaml")
	if code != 0 || !strings.Contains(out, "approval_required layer 3") || !strings.Contains(out, `send: send_template {"list_id":"LIST-9"} (external)`) {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`agentplane workflow approve \[--reject\] (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no approve line:\n%s", out)
	}
	id, cp := m[1], m[2]
	if _, errOut, code := runEnv(t, env, "", "workflow", "approve", id, id+"-a99"); code != 1 || !strings.Contains(errOut, "is not the pending approval") {
		t.Fatalf("wrong checkpoint: %d %s", code, errOut)
	}
	out, errOut, code = runEnv(t, env, "", "workflow", "approve", id, cp)
	if code != 0 || !strings.Contains(out, "task_completed layer 3 send (send_template)") || !strings.Contains(out, "completed after 3 layer(s)") {
		t.Fatalf("approve: %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = runEnv(t, env, "", "workflow", "status", id)
	if code != 0 || !strings.Contains(out, "workflow "+id+": completed") {
		t.Fatalf("status: %d %s", code, out)
	}
	if _, errOut, code := runEnv(t, env, "", "workflow", "continue", id); code != 1 || !strings.Contains(errOut, "is completed: it takes no more commands") {
		t.Fatalf("continue a completed workflow: %d %s", code, errOut)
	}
	if _, errOut, code := runEnv(t, env, "", "workflow", "abort", id); code != 1 || !strings.Contains(errOut, "reason is required") {
		t.Fatalf("abort without a reason: %d %s", code, errOut)
	}
	if _, errOut, code := runEnv(t, env, "", "workflow", "status", "wf_nope"); code != 1 || !strings.Contains(errOut, `no workflow "wf_nope"`) {
		t.Fatalf("unknown workflow: %d %s", code, errOut)
	}
	if _, _, code := runEnv(t, env, "", "workflow", "launch"); code != 2 {
		t.Fatalf("unknown subcommand: %d", code)
	}
}
