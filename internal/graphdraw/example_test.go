package graphdraw_test

import (
	"fmt"
	"time"

	"github.com/snagdev/snag/internal/graphdraw"
)

func ExampleMermaid() {
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	g := graphdraw.Graph{
		Title: "Search",
		Nodes: []graphdraw.Node{
			{Key: "N-1", Title: "Use SQLite FTS5", Type: "option", Trust: "unvetted", Created: at},
			{Key: "N-2", Title: "Search with FTS5", Type: "decision", Created: at.Add(time.Hour)},
		},
		Edges: []graphdraw.Edge{{From: "N-2", To: "N-1", Kind: "chose", Why: "already linked"}},
	}
	fmt.Print(string(graphdraw.Mermaid(g)))
	// Output:
	// ---
	// title: "Search"
	// ---
	// flowchart LR
	// 	n_1["N-1<br/>Use SQLite FTS5"]:::option
	// 	n_2["N-2<br/>Search with FTS5"]:::decision
	// 	n_2 -->|"chose"| n_1
	// 	classDef decision fill:#ede9fe,stroke:#6d28d9,color:#1f2328
	// 	classDef option fill:#fef9c3,stroke:#a16207,color:#1f2328
	// 	classDef unvetted stroke-dasharray:5 3
	// 	class n_1 unvetted
}
