package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/audit"
	"github.com/agentplane/agentplane/events"
	"github.com/agentplane/agentplane/resolve"
	"github.com/agentplane/agentplane/tool"
	"github.com/agentplane/agentplane/trigger"
)

// startArg is a mode prompt's argument: the parameter of a command that
// opens an entity in that mode (the item to start with).
type startArg struct {
	name string
	cmd  *agentplane.CommandDefinition
}

// startArgs are the mode's prompt arguments for the principal.
func (b *binding) startArgs(mode string) []startArg {
	reg := b.s.core.View().Registry()
	var out []startArg
	for _, id := range reg.ActiveCommands(mode, b.p.Roles) {
		c, _ := reg.Command(id)
		if !c.SetsActiveContext || c.Parameter == "" || slices.ContainsFunc(out, func(a startArg) bool { return a.name == c.Parameter }) {
			continue
		}
		out = append(out, startArg{name: c.Parameter, cmd: c})
	}
	return out
}

// addPrompts registers a prompt per mode: what the mode is for, its
// commands and tools, and optionally the item to start with.
func (b *binding) addPrompts() {
	cfg := b.s.core.Config()
	for i := range cfg.Modes {
		m := &cfg.Modes[i]
		p := &mcp.Prompt{Name: m.Key, Title: m.DisplayName + " mode",
			Description: strings.TrimSpace(fmt.Sprintf("Work in agentplane's %s mode: %s", m.DisplayName, m.Description))}
		for _, a := range b.startArgs(m.Key) {
			what := cfg.EntityTypeName(a.cmd.ActiveEntityType)
			p.Arguments = append(p.Arguments, &mcp.PromptArgument{Name: a.name, Title: "The " + what + " to start with",
				Description: fmt.Sprintf("Optional: the %s to open first, by id or name (completion offers them, ranked as agentplane's resolver ranks them).", what)})
		}
		b.srv.AddPrompt(p, b.prompt(m))
	}
}

// prompt answers prompts/get for a mode.
func (b *binding) prompt(m *agentplane.Mode) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		starts := b.startArgs(m.Key)
		for name := range req.Params.Arguments {
			if !slices.ContainsFunc(starts, func(a startArg) bool { return a.name == name }) {
				var known []string
				for _, a := range starts {
					known = append(known, a.name)
				}
				return nil, invalidParams("prompt %s has no argument %q (it takes: %s)", m.Key, name, cmp.Or(strings.Join(known, ", "), "none"))
			}
		}
		v := b.s.core.View() // the registry and the configuration of one reload
		reg, cfg := v.Registry(), v.Config()
		var sb strings.Builder
		fmt.Fprintf(&sb, "You are assisting in agentplane's %s mode.", m.DisplayName)
		if m.Description != "" {
			fmt.Fprintf(&sb, " %s", m.Description)
		}
		if m.SystemPromptSummary != "" {
			fmt.Fprintf(&sb, "\n%s", m.SystemPromptSummary)
		}
		sb.WriteString("\n\nWhat the user can ask for here (agentplane runs these itself when the user says them):")
		for _, id := range reg.ActiveCommands(m.Key, b.p.Roles) {
			c, _ := reg.Command(id)
			fmt.Fprintf(&sb, "\n- %s", c.DisplayName)
			if c.Description != "" {
				fmt.Fprintf(&sb, ": %s", strings.TrimSuffix(c.Description, "."))
			}
			if ex := trigger.CommandExample(c); ex != "" {
				fmt.Fprintf(&sb, " (e.g. “%s”)", ex)
			}
		}
		sb.WriteString("\n\nTools you can call (every call goes through agentplane's gate; one that changes the world waits for the human's confirmation):")
		for _, t := range b.s.core.ActiveTools(m.Key, b.p.Roles) {
			usage, _, _ := strings.Cut(t.Spec.Usage, ". ")
			fmt.Fprintf(&sb, "\n- %s (%s): %s", t.Spec.Name, t.Spec.Impact, strings.TrimSuffix(usage, "."))
		}
		for _, a := range starts {
			v := strings.TrimSpace(req.Params.Arguments[a.name])
			if v == "" {
				continue
			}
			it, err := b.startItem(ctx, m.Key, a, v)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&sb, "\n\nStart with the %s “%s” (%s): open it with %s {\"catalog_id\": %q, \"id\": %q}.",
				cfg.EntityTypeName(a.cmd.ActiveEntityType), it.Header.DisplayName, it.Header.ID, tool.SetActiveEntityName, a.cmd.Source.CatalogID, it.Header.ID)
		}
		return &mcp.GetPromptResult{Description: fmt.Sprintf("agentplane's %s mode", m.DisplayName),
			Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: sb.String()}}}}, nil
	}
}

// startItem finds a prompt argument's item: by id, else by a name,
// alias or near spelling that picks exactly one.
func (b *binding) startItem(ctx context.Context, mode string, a startArg, v string) (*agentplane.ResolverItem, error) {
	sess, err := b.bound(ctx)
	if err != nil {
		return nil, err
	}
	what := b.s.core.Config().EntityTypeName(a.cmd.ActiveEntityType)
	ix, err := tool.SourceIndex(ctx, b.s.core.View().Registry(), resolve.SessionCaller(sess, b.p.Roles, mode), a.cmd.Source)
	if err != nil {
		return nil, invalidParams("%s: the %s catalog cannot be read: %v", a.name, what, err)
	}
	if it, ok := ix.Lookup(v); ok {
		return it, nil
	}
	if res := ix.Resolve(v, 2); res.Strict() && len(res.Items) == 1 {
		return ix.Item(res.Items[0]), nil
	}
	return nil, invalidParams("%s=%q: no single %s has that id or name (complete the argument to see them)", a.name, v, what)
}

// complete answers completion/complete: a mode prompt's start argument,
// or a catalog template's {catalog}, {provider} or {id}, from the
// resolver: the same ranking the router uses (names, aliases, typos,
// any script), ids as values.
func (b *binding) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref, arg := req.Params.Ref, req.Params.Argument
	var given map[string]string
	if req.Params.Context != nil {
		given = req.Params.Context.Arguments
	}
	sess, err := b.bound(ctx)
	if err != nil {
		return nil, err
	}
	mode := sess.Mode
	var src agentplane.ResolverSource
	switch ref.Type {
	case "ref/prompt":
		if !b.s.core.ModeOK(ref.Name) {
			if b.s.opts.Complete != nil {
				return b.s.opts.Complete(ctx, req)
			}
			return nil, invalidParams("no prompt %q", ref.Name)
		}
		mode = ref.Name
		starts := b.startArgs(mode)
		i := slices.IndexFunc(starts, func(a startArg) bool { return a.name == arg.Name })
		if i < 0 {
			return nil, invalidParams("prompt %s has no argument %q", ref.Name, arg.Name)
		}
		src = starts[i].cmd.Source
	case "ref/resource":
		key := ""
		switch ref.URI {
		case templateCatalog, templateCatalogItem:
			key = "catalog"
		case templateProvider, templateProvItem:
			key = "provider"
		default:
			if b.s.opts.Complete != nil && !strings.HasPrefix(ref.URI, "agentplane://") {
				return b.s.opts.Complete(ctx, req)
			}
			return completion(nil, 0), nil // a resource with nothing to complete
		}
		switch {
		case arg.Name == key:
			var ids []string
			for _, s := range b.activeSources(mode) {
				id := s.CatalogID
				if key == "provider" {
					id = s.ProviderID
				}
				if id != "" && strings.HasPrefix(strings.ToLower(id), strings.ToLower(arg.Value)) {
					ids = append(ids, id)
				}
			}
			return completion(ids, len(ids)), nil
		case arg.Name == "id" && (ref.URI == templateCatalogItem || ref.URI == templateProvItem):
			id := given[key]
			if id == "" {
				return completion(nil, 0), nil // the {catalog} first
			}
			if key == "catalog" {
				src.CatalogID = id
			} else {
				src.ProviderID = id
			}
		default:
			return nil, invalidParams("resource template %s has no argument %q to complete", ref.URI, arg.Name)
		}
	default:
		return nil, invalidParams("cannot complete a %q reference (want ref/prompt or ref/resource)", ref.Type)
	}
	m, err := tool.SearchSource(ctx, b.s.core.View().Registry(), resolve.SessionCaller(sess, b.p.Roles, mode), src, arg.Value, MaxCompletions)
	var te *tool.Error
	if errors.As(err, &te) && (te.Code == "inactive_catalog" || te.Code == "bad_args") {
		return completion(nil, 0), nil // nothing this principal can see there
	}
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(m.Items))
	for _, it := range m.Items {
		ids = append(ids, it.ID)
	}
	total := len(ids)
	if strings.TrimSpace(arg.Value) == "" {
		if ix, err := tool.SourceIndex(ctx, b.s.core.View().Registry(), resolve.SessionCaller(sess, b.p.Roles, mode), src); err == nil {
			total = ix.Len()
		}
	}
	return completion(ids, total), nil
}

func completion(values []string, total int) *mcp.CompleteResult {
	if values == nil {
		values = []string{}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: total, HasMore: total > len(values)}}
}

// subscribe accepts subscriptions to the session's state and work
// context, and starts following the session for them.
func (b *binding) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if req.Params.URI != URISession && req.Params.URI != URIContext {
		if b.s.opts.Subscribable != nil && b.s.opts.Subscribable(req.Params.URI) {
			return nil
		}
		return invalidParams("%q cannot be subscribed to: %s and %s can", req.Params.URI, URISession, URIContext)
	}
	if _, err := b.open(ctx); err != nil {
		return err
	}
	b.s.mu.Lock() // Close waits for the followers: none starts after it
	defer b.s.mu.Unlock()
	if b.s.closed {
		return invalidParams("the server is shutting down")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopWatch == nil {
		wctx, cancel := context.WithCancel(context.Background())
		b.stopWatch = cancel
		b.s.watchers.Go(func() { b.follow(wctx) })
	}
	return nil
}

// follow sends notifications/resources/updated when the bound session's
// state (and its work context) change — by this client's calls or any
// other writer's — until ctx ends or the event hub closes. It runs the
// streams' loop (events.Stream) from the session's last record: a
// subscription the hub drops (this client fell behind) is taken again
// after the records it missed, since an MCP client cannot resume one.
func (b *binding) follow(ctx context.Context) {
	id, err := b.open(ctx)
	if err != nil {
		return
	}
	last, err := b.s.core.Session(ctx, id)
	if err != nil {
		return
	}
	var after int64
	if recs, err := b.s.core.Page(ctx, id, 0, 0, 1); err == nil && len(recs) > 0 {
		after = recs[0].Seq
	}
	read := func(ctx context.Context, session string, after int64, limit int) ([]audit.Record, error) {
		return b.s.core.Page(ctx, session, 0, after, limit) // after ≥ 1: the session's open record at least
	}
	st := &events.Stream{Feed: &events.SessionFeed{Hub: b.s.hub, Read: read, Session: id}, After: after, Resume: true,
		Sink: &updatedSink{b: b, session: id, last: last}}
	st.Run(ctx)
}

// updatedSink is the sink of a session's stream to an MCP client that
// subscribed to its resources: after each batch of new records it reads
// the session once, and sends notifications/resources/updated for the
// session when its version moved (and for its work context when that
// changed). It sends no heartbeat (the SDK's keep-alive is the client's)
// and no closing frame (MCP has none: the subscription ends with the MCP
// session).
type updatedSink struct {
	b       *binding
	session string
	last    *agentplane.Session // as last notified
	moved   bool                // records came since the last flush
}

func (k *updatedSink) Send(_ context.Context, f events.Frame) error {
	k.moved = k.moved || f.Seq > 0 // a transient frame changes nothing
	return nil
}

func (k *updatedSink) Flush(ctx context.Context) error {
	if !k.moved {
		return nil
	}
	k.moved = false
	now, err := k.b.s.core.Session(ctx, k.session)
	if err != nil || now.Version == k.last.Version {
		return nil // a read that failed: the next batch reads again
	}
	k.b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: URISession})
	was, _ := json.Marshal(k.last.AWC)
	is, _ := json.Marshal(now.AWC)
	if string(was) != string(is) {
		k.b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: URIContext})
	}
	k.last = now
	return nil
}

func (k *updatedSink) Heartbeat(context.Context) error             { return nil }
func (k *updatedSink) Close(context.Context, events.Closing) error { return nil }
