package plane

import (
	"context"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/llm"
)

// StepRequest is one message of the person in a conversation.
type StepRequest struct {
	SessionID string
	Principal string
	Roles     []string
	// Input is the message; its Roles are set from Roles.
	Input agentplane.TurnInput
	// RequestID is the client's idempotency key (see core.TurnRequest): a
	// turn answered from its record does not reach the LLM again.
	RequestID string
	// OnText gets the LLM's text as it streams; nil ignores it.
	OnText func(delta string)
}

// Step is what one conversation step did.
type Step struct {
	// Turn is the router's turn through the core.
	Turn core.Turn
	// LLM is the LLM's reply when the router handed the turn over and an
	// LLM is connected; nil otherwise.
	LLM *llm.Reply
	// Session is the session after the step (after the LLM's calls, when
	// it answered).
	Session *agentplane.Session
}

// HandedOver reports whether the router handed the step's turn to the
// LLM (whether or not one is connected): a declined confirmation is not.
func (s Step) HandedOver() bool {
	d := s.Turn.Decision
	return d.Action == agentplane.ActionContinueLLM && d.ReasonCode != agentplane.ReasonConfirmationDeclined
}

// Step takes one conversation step, the same for every front end (the
// HTTP API, the WebSocket, the terminal's chat): the turn through the
// router and the gate, then — when the router hands it over and the turn
// was not answered from its record — the LLM, and when the LLM fails, the
// notifications the agent holds for the person go to them at once (an
// alert must not wait for a model that is down). The step is traced as
// one turn. The error is the turn's (nothing was recorded, or the
// store failed) or the agent's store's — then Step.Turn is the turn that
// was recorded; an LLM that fails is Step.LLM.Failure, not an error.
func (rt *Runtime) Step(ctx context.Context, r StepRequest) (st Step, err error) {
	ctx, end := rt.Core.TraceTurn(ctx, r.SessionID)
	defer func() {
		if err != nil {
			end(nil, err)
		} else {
			end(&st.Turn.Decision, nil)
		}
	}()
	in := r.Input
	in.Roles = r.Roles
	if st.Turn, err = rt.Core.Turn(ctx, core.TurnRequest{SessionID: r.SessionID, Principal: r.Principal, RequestID: r.RequestID, Input: in}); err != nil {
		return Step{}, err
	}
	st.Session = st.Turn.Session
	if rt.Agent == nil || st.Turn.Repeated || !st.HandedOver() {
		return st, nil
	}
	reply, err := rt.Agent.Turn(ctx, llm.TurnRequest{SessionID: r.SessionID, Principal: r.Principal, Roles: r.Roles, OnText: r.OnText})
	if err != nil {
		return st, err
	}
	sess, err := rt.Core.Session(ctx, r.SessionID)
	if err != nil {
		return st, err
	}
	st.LLM, st.Session = &reply, sess
	if reply.Failure != "" && rt.Bus != nil {
		rt.Bus.AgentFailed(ctx, st.Session) // the agent's alerts go to the person now
	}
	return st, nil
}
