package notify

import (
	"context"
)

// SentSize is how many notifications the bus remembers as sent to this
// instance's streams.
func SentSize(b *Bus) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sent.at)
}

// SetSentMax bounds what the bus remembers as sent (0: the default).
func SetSentMax(b *Bus, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent.max = n
}

// UserStatements are the statements that find a user's notifications,
// with example arguments for the user: a page of the inbox, the unread
// count, what a stream catches up on, and List with and without a
// channel, by states (among them those with an index of every user's
// rows in that state).
func UserStatements(user string) map[string][2]any {
	list, listArgs := listSQL(Query{UserID: user})
	listA, listAArgs := listSQL(Query{UserID: user, Channel: ChannelInbox, States: []State{StatePending}})
	listStates, listStatesArgs := listSQL(Query{UserID: user, States: []State{StatePending, StateDispatched}})
	listDead, listDeadArgs := listSQL(Query{UserID: user, States: []State{StateFailed}})
	listEscalated, listEscalatedArgs := listSQL(Query{UserID: user, Channel: ChannelInbox, States: []State{StateEscalated}})
	return map[string][2]any{
		"inbox":          {inboxSQL, []any{userKey(user), 10}},
		"unread":         {unreadSQL, []any{userKey(user)}},
		"inboxSince":     {inboxSinceSQL(2), []any{userKey(user), userKey(user + "-2"), int64(0)}},
		"list":           {list, listArgs},
		"list A":         {listA, listAArgs},
		"list by states": {listStates, listStatesArgs},
		"list dead":      {listDead, listDeadArgs},
		"list escalated": {listEscalated, listEscalatedArgs},
	}
}

// AckStatement is the statement that delivers a batch of acks, the user's
// notification ids[i] for users[i], with its arguments; whole: acks that
// want the notification back (Ack), not Acknowledge's.
func AckStatement(l *Ledger, ids, users []string, whole bool) (string, []any) {
	batch := make([]*ackReq, len(ids))
	for i := range ids {
		batch[i] = &ackReq{id: ids[i], user: users[i], whole: whole}
	}
	return l.ackStatement(batch)
}

// AckTogether commits acks as one batch, ids[i] for users[i], whole[i]
// whether that one wants its notification back, and returns what each
// got and whether the batch delivered it.
func AckTogether(ctx context.Context, l *Ledger, ids, users []string, whole []bool) ([]Notification, []bool, error) {
	batch := make([]*ackReq, len(ids))
	for i := range ids {
		batch[i] = &ackReq{id: ids[i], user: users[i], whole: whole[i]}
	}
	err := l.commitAcks(ctx, func() []*ackReq { return batch })
	out, ok := make([]Notification, len(batch)), make([]bool, len(batch))
	for i, r := range batch {
		out[i], ok[i] = r.out, r.ok
	}
	return out, ok, err
}

// UnreadStates is unreadStates: an inbox notification's states while
// unread, quoted for SQL.
const UnreadStates = unreadStates
