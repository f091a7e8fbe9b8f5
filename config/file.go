package config

import "github.com/agentplane/agentplane/resolve"

// The YAML form of a configuration file. Field names are normative: see the
// README's configuration reference.

type file struct {
	Version    int             `yaml:"version"`
	Modes      []modeFile      `yaml:"modes"`
	Toolboxes  []toolboxFile   `yaml:"toolboxes"`
	Catalogs   []catalogFile   `yaml:"catalogs"`
	Commands   []commandFile   `yaml:"commands"`
	Tools      []toolFile      `yaml:"tools"`
	MCPServers []mcpServerFile `yaml:"mcp_servers"`
	Router     routerFile      `yaml:"router"`
	Auth       authFile        `yaml:"auth"`
	LLM        *llmFile        `yaml:"llm"`

	EntityTypes map[string]entityTypeFile `yaml:"entity_types"`
}

type entityTypeFile struct {
	DisplayName string `yaml:"display_name"`
}

type llmFile struct {
	BaseURL         string   `yaml:"base_url"`
	Model           string   `yaml:"model"`
	APIKeyEnv       string   `yaml:"api_key_env"`
	TimeoutMS       int      `yaml:"timeout_ms"`
	MaxToolRounds   int      `yaml:"max_tool_rounds"`
	MaxHistoryTurns int      `yaml:"max_history_turns"`
	Temperature     *float64 `yaml:"temperature"`
}

type authFile struct {
	Keys []apiKeyFile `yaml:"keys"`
	OIDC *oidcFile    `yaml:"oidc"`
}

type oidcFile struct {
	Issuer         string   `yaml:"issuer"`
	Audience       string   `yaml:"audience"`
	UserClaim      string   `yaml:"user_claim"`
	RolesClaim     string   `yaml:"roles_claim"`
	AllowedAlgs    []string `yaml:"allowed_algs"`
	RequiredScopes []string `yaml:"required_scopes"`
	ClientID       string   `yaml:"client_id"`
	Scopes         []string `yaml:"scopes"`
}

type apiKeyFile struct {
	UserID    string   `yaml:"user_id"`
	Roles     []string `yaml:"roles"`
	KeySHA256 string   `yaml:"key_sha256"`
	KeyEnv    string   `yaml:"key_env"`
	Key       string   `yaml:"key"` // refused: keys are not written in configuration
}

type mcpServerFile struct {
	Name             string            `yaml:"name"`
	Command          []string          `yaml:"command"`
	URL              string            `yaml:"url"`
	Headers          map[string]string `yaml:"headers"`
	HeadersEnv       map[string]string `yaml:"headers_env"`
	Prefix           string            `yaml:"prefix"`
	Impact           map[string]string `yaml:"impact"`
	ConnectTimeoutMS int               `yaml:"connect_timeout_ms"`
	TimeoutMS        int               `yaml:"timeout_ms"`
}

type modeFile struct {
	Key                 string   `yaml:"key"`
	ID                  string   `yaml:"id"`
	DisplayName         string   `yaml:"display_name"`
	Description         string   `yaml:"description"`
	SystemPromptSummary string   `yaml:"system_prompt_summary"`
	Default             bool     `yaml:"default"`
	Aliases             []string `yaml:"aliases"`
	HumanRoleHints      []string `yaml:"human_role_hints"`
	ExampleUtterances   []string `yaml:"example_utterances"`
	Toolboxes           []string `yaml:"toolboxes"`
}

type toolboxFile struct {
	ID            string   `yaml:"id"`
	DisplayName   string   `yaml:"display_name"`
	Catalogs      []string `yaml:"catalogs"`
	Providers     []string `yaml:"providers"`
	Commands      []string `yaml:"commands"`
	Tools         []string `yaml:"tools"`
	MCPServers    []string `yaml:"mcp_servers"`
	RequiredRoles []string `yaml:"required_roles"`
}

type catalogFile struct {
	ID          string             `yaml:"id"`
	DisplayName string             `yaml:"display_name"`
	EntityType  string             `yaml:"entity_type"`
	Items       []resolve.WireItem `yaml:"items"`
	Provider    *providerFile      `yaml:"provider"`
	TTLSeconds  int                `yaml:"ttl_seconds"`
}

type providerFile struct {
	HTTP *httpFile `yaml:"http"`
}

type httpFile struct {
	URL        string            `yaml:"url"`
	Headers    map[string]string `yaml:"headers"`
	HeadersEnv map[string]string `yaml:"headers_env"`
	TimeoutMS  int               `yaml:"timeout_ms"`
}

type resolverFile struct {
	Catalog  string `yaml:"catalog"`
	Provider string `yaml:"provider"`
}

type commandFile struct {
	ID                   string        `yaml:"id"`
	DisplayName          string        `yaml:"display_name"`
	Description          string        `yaml:"description"`
	Kind                 string        `yaml:"kind"`
	Tool                 string        `yaml:"tool"`
	Parameter            string        `yaml:"parameter"`
	Resolver             *resolverFile `yaml:"resolver"`
	PickerType           string        `yaml:"picker_type"`
	TargetCatalog        string        `yaml:"target_catalog"`
	TargetMode           string        `yaml:"target_mode"`
	OnSelect             string        `yaml:"on_select"`
	SetsSessionMode      bool          `yaml:"sets_session_mode"`
	SetsActiveContext    bool          `yaml:"sets_active_context"`
	ClearsActiveContext  bool          `yaml:"clears_active_context"`
	ActiveEntityType     string        `yaml:"active_entity_type"`
	Domain               string        `yaml:"domain"`
	RequiresConfirmation bool          `yaml:"requires_confirmation"`
	ProducesSideEffects  bool          `yaml:"produces_side_effects"`
	ConfirmationText     string        `yaml:"confirmation_text"`
	Preconditions        *precondFile  `yaml:"preconditions"`
	Aliases              []string      `yaml:"aliases"`
	Triggers             []string      `yaml:"triggers"`
	Examples             []string      `yaml:"examples"`
}

type toolFile struct {
	Name                 string         `yaml:"name"`
	Description          string         `yaml:"description"`
	Impact               string         `yaml:"impact"`
	Risk                 string         `yaml:"risk"`
	RequiresConfirmation bool           `yaml:"requires_confirmation"`
	Idempotent           bool           `yaml:"idempotent"`
	InputSchema          map[string]any `yaml:"input_schema"`
	TimeoutMS            int            `yaml:"timeout_ms"`
	HTTP                 *httpFile      `yaml:"http"`
	Program              string         `yaml:"program"`
}

type routerFile struct {
	Fillers                *[]string `yaml:"fillers"`
	PickerTTLSeconds       int       `yaml:"picker_ttl_seconds"`
	ConfirmationTTLSeconds int       `yaml:"confirmation_ttl_seconds"`
	MaxOptions             int       `yaml:"max_options"`
	ExampleThreshold       *float64  `yaml:"example_threshold"`
	NegativeExamples       []string  `yaml:"negative_examples"`
}

type precondFile struct {
	Modes          []string `yaml:"modes"`
	RequiresActive []string `yaml:"requires_active"`
}
