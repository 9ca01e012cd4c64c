module github.com/snagdev/snag

go 1.26

require (
	github.com/oklog/ulid/v2 v2.1.2
	go.yaml.in/yaml/v3 v3.0.6
)
