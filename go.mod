module github.com/agentplane/agentplane

go 1.26.0

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/text v0.44.0
	pgregory.net/rapid v1.3.0
)
