package notify

import (
	"context"
	"fmt"

	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/store"
)

// Internal runs the internal turn of an AGENT/AGENT notification: the
// agent handles it on its own, in the notification's session (or the
// user's newest one), with nothing shown to the user; read and internal
// tools run. When the model calls a tool that changes the world, the call
// does not run: it becomes a confirmation for the human (the session's
// pending confirmation, with its token) and the notification is promoted
// to the user at once — escalated to the inbox or the floor by address,
// carrying the question. The model is told only that the user must
// confirm, never why. The LLM failing escalates it too.
func (b *Bus) Internal(ctx context.Context, n Notification) error {
	if b.agent == nil {
		return b.Escalate(ctx, n)
	}
	held, err := b.ledger.hold(ctx, n)
	if err != nil {
		return err // another owner has it
	}
	session := n.SessionID
	if session == "" {
		page, err := b.core.Sessions(ctx, store.SessionQuery{Owner: n.UserID, Limit: 1})
		if err != nil {
			return err
		}
		if len(page.Sessions) == 0 {
			return b.promote(ctx, held, "") // no conversation to act in: the user decides
		}
		session = page.Sessions[0].Session.ID
	}
	task := fmt.Sprintf("[NOTIFICATION %s] %s", n.ID, n.Title)
	if n.Body != "" {
		task += ": " + n.Body
	}
	if n.Directive != "" {
		task += "\nInstructions: " + n.Directive
	}
	task += fmt.Sprintf("\nHandle it on your own; the user does not see this turn. When it is handled, write [ack:%s].", n.ID)
	reply, err := b.agent.Turn(ctx, llm.TurnRequest{SessionID: session, Principal: n.UserID, Task: task})
	switch {
	case err != nil:
		b.promote(ctx, held, "")
		return err
	case reply.Question != "":
		return b.promote(ctx, held, reply.Question)
	case reply.Failure != "":
		return b.promote(ctx, held, "")
	}
	return nil
}

// promote gives a held notification to the user at once: escalated by
// its owner's lease and shown on the inbox or the floor, with the
// question the human must answer, if any.
func (b *Bus) promote(ctx context.Context, held Notification, question string) error {
	n, err := b.ledger.Escalate(ctx, held.ID, held.OwnerLease)
	if err != nil {
		return err
	}
	if question != "" {
		n.Body = question // what the human is asked to confirm
	}
	return b.show(ctx, n)
}
