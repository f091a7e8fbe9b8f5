// Command mcpconformance serves agentplane's MCP server with the fixture
// tools the official MCP conformance suite calls by name (test_simple_text,
// test_sampling, …), so the suite's tool scenarios can run against the
// same server code and transport as `agentplane serve`'s /mcp: the demo
// configuration's tools go through the gate as there; the fixtures are
// added beside them on every MCP server made (they exercise the protocol —
// content types, logging, progress, sampling, elicitation — not
// agentplane's actions, so they do not pass the gate).
//
//	go run ./internal/testkit/mcpconformance --addr 127.0.0.1:18081
//	../shared/tools/mcp/conformance.sh --profile tools http://127.0.0.1:18081/mcp
package main

//lint:file-ignore SA1019 the suite's fixtures test logging and sampling, deprecated by the 2026-07-28 protocol but still in it

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/mcpserver"
	"github.com/agentplane/agentplane/plane"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rt, err := plane.Open(ctx, plane.Options{Config: core.Source{YAML: demo.YAML, Name: demo.Name}, Core: core.Options{Programs: demo.Programs(nil)}})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(time.Minute)
	m := mcpserver.New(rt, &mcpserver.Options{Extra: Register, Complete: complete, Subscribable: func(uri string) bool { return uri == watched }})
	srv := &http.Server{Addr: *addr, Handler: httpapi.New(rt, &httpapi.Options{MCP: m.Handler()}).Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	fmt.Printf("mcpconformance: serving http://%s/mcp\n", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// object is the input schema of a fixture that takes no arguments.
var object = json.RawMessage(`{"type":"object"}`)

// Register adds the suite's fixtures to an MCP server: tools, resources
// and prompts.
func Register(s *mcp.Server) {
	registerResourcesAndPrompts(s)
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	add := func(name, desc string, schema json.RawMessage, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: schema}, h)
	}
	// SEP-1613: a 2020-12 schema is listed as written ($schema, $defs, additionalProperties)
	add("json_schema_2020_12_tool", "Takes a person with an address ($defs).", json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",`+
		`"$defs":{"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},`+
		`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"}},"additionalProperties":false}`),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
	add("test_simple_text", "Answers with one text content.", object, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("This is a simple text response for testing."), nil
	})
	add("test_image_content", "Answers with one PNG image.", object, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: pixel(), MIMEType: "image/png"}}}, nil
	})
	add("test_audio_content", "Answers with one WAV sound.", object, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: silence(), MIMEType: "audio/wav"}}}, nil
	})
	add("test_embedded_resource", "Answers with an embedded text resource.", object, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource"}}}}, nil
	})
	add("test_multiple_content_types", "Answers with text, an image and a resource.", object, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "This is text content"},
			&mcp.ImageContent{Data: pixel(), MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource"}},
		}}, nil
	})
	add("test_tool_with_logging", "Logs three messages while it runs.", object, func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			r.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: m})
			time.Sleep(20 * time.Millisecond)
		}
		return text("Tool with logging executed successfully"), nil
	})
	add("test_tool_with_progress", "Reports progress at 0, 50 and 100 of 100.", object, func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := r.Params.GetProgressToken()
		for _, p := range []float64{0, 50, 100} {
			r.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100, Message: fmt.Sprintf("step %.0f of 100", p)})
			time.Sleep(20 * time.Millisecond)
		}
		return text(fmt.Sprint(tok)), nil
	})
	add("test_error_handling", "Always fails.", object, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}}, nil
	})
	add("test_sampling", "Asks the client's LLM to complete a prompt.",
		json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`),
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ Prompt string }
			json.Unmarshal(r.Params.Arguments, &in)
			res, err := r.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling failed: %w", err)
			}
			answer := "(non-text response)"
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				answer = tc.Text
			}
			return text("LLM response: " + answer), nil
		})
	elicit := func(message string, schema json.RawMessage) mcp.ToolHandler {
		return func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if message == "" {
				var in struct{ Message string }
				json.Unmarshal(r.Params.Arguments, &in)
				message = in.Message
			}
			res, err := r.Session.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: schema})
			if err != nil {
				return nil, fmt.Errorf("elicitation failed: %w", err)
			}
			return text(fmt.Sprintf("Elicitation result: action=%s, content=%v", res.Action, res.Content)), nil
		}
	}
	add("test_elicitation", "Asks the user for a username.",
		json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`),
		elicit("", json.RawMessage(`{"type":"object","properties":{"username":{"type":"string","description":"Your preferred username"}},"required":["username"]}`)))
	add("test_elicitation_sep1034_defaults", "Asks with default values (SEP-1034).", object, elicit("Test defaults for primitives", json.RawMessage(`{"type":"object","properties":{
		"name":{"type":"string","description":"User name","default":"John Doe"},
		"age":{"type":"integer","description":"User age","default":30},
		"score":{"type":"number","description":"User score","default":95.5},
		"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},
		"verified":{"type":"boolean","description":"Verification status","default":true}}}`)))
	add("test_elicitation_sep1330_enums", "Asks with the enum forms of SEP-1330.", object, elicit("Test enum schemas", json.RawMessage(`{"type":"object","properties":{
		"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},
		"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},
		"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},
		"untitledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},
		"titledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]}}}}`)))
}

// watched is the fixture resource the suite subscribes to.
const watched = "test://watched-resource"

// registerResourcesAndPrompts adds the suite's fixture resources and
// prompts (test://…, test_…_prompt) beside agentplane's own.
func registerResourcesAndPrompts(s *mcp.Server) {
	text := func(uri, mime, t string) *mcp.ReadResourceResult {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: t}}}
	}
	s.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A fixed text.", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text(r.Params.URI, "text/plain", "This is the content of the static text resource."), nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A 1×1 PNG.", MIMEType: "image/png"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "image/png", Blob: pixel()}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Description: "Data for an id.", MIMEType: "application/json"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(r.Params.URI, "test://template/"), "/data")
			data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return text(r.Params.URI, "application/json", string(data)), nil
		})
	s.AddResource(&mcp.Resource{URI: watched, Name: "watched-resource", Description: "A resource to subscribe to.", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return text(r.Params.URI, "text/plain", "Watched resource content"), nil
		})
	say := func(t string) *mcp.PromptMessage {
		return &mcp.PromptMessage{Role: "user", Content: &mcp.TextContent{Text: t}}
	}
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A prompt without arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{say("This is a simple prompt for testing.")}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with two required arguments.",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{say(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", r.Params.Arguments["arg1"], r.Params.Arguments["arg2"]))}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt that embeds a resource.",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: r.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}},
				say("Please process the embedded resource above.")}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt with an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.ImageContent{Data: pixel(), MIMEType: "image/png"}}, say("Please analyze the image above.")}}, nil
		})
}

// complete answers completions of the fixtures: none to offer.
func complete(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
}

// pixel is a 1×1 PNG.
func pixel() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// silence is a WAV file of 8 samples of silence (8 kHz, 8-bit mono).
func silence() []byte {
	var b bytes.Buffer
	samples := []byte{128, 128, 128, 128, 128, 128, 128, 128}
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(36+len(samples)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(8000), uint32(8000), uint16(1), uint16(8)} {
		binary.Write(&b, binary.LittleEndian, v) // PCM, mono, 8 kHz, 8000 B/s, 1 B per frame, 8 bits
	}
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, uint32(len(samples)))
	b.Write(samples)
	return b.Bytes()
}
