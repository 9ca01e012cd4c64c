package api

// Who may call a route.
const (
	// Anyone: no token is needed.
	Anyone = "anyone"
	// Token: a person or an agent, with the token.
	Token = "token"
	// Agent: an agent, with the token and the session header.
	Agent = "agent"
	// Person: a person, with the token and no session header.
	Person = "person"
	// Extension: the browser extension, from its chrome-extension://
	// origin, with the capture credential (or, on POST /pair, a pairing
	// code) and never the token.
	Extension = "extension"
)

// Route is one route of snagd's HTTP API.
type Route struct {
	// Op is the operation the route carries (internal/ops), or "" for a
	// route of snagd's own as a server (health, streams, MCP, the
	// board's login and the extension's pairing).
	Op string
	// When, on one of several routes of one method and path, picks it
	// for the requests whose JSON body sets this field true (dry_run).
	When string
	// Method is the HTTP method.
	Method string
	// Path is the path pattern; {name} is one segment.
	Path string
	// Who may call it: Anyone, Token, Agent, Person or Extension.
	Who string
	// Query is the type of its query (a ListQuery, say), or nil.
	Query any
	// Request is the type of its JSON body, or nil for none.
	Request any
	// Answer is the type of its JSON answer, or nil for a stream.
	Answer any
	// Status is the status of a successful answer.
	Status int
	// Doc says what it does.
	Doc string
}

// Routes is every route of the API, in the order the reference lists
// them. snagd's route table must serve exactly these (a test checks it).
var Routes = []Route{
	{Method: "GET", Path: "/health", Who: Anyone, Answer: Health{}, Status: 200,
		Doc: "Who is serving: the project, the version, whether the first read of the files is done. ?nonce=X adds the proof; ?progress=1 adds the counts of background work done (sweeps, batches, second looks), which tests wait on."},
	{Method: "GET", Path: "/favicon.ico", Who: Anyone, Status: 204,
		Doc: "Nothing: what a browser asks for on its own, on every page of the board, answered without the token."},
	{Op: "list", Method: "GET", Path: "/tasks", Who: Token, Query: ListQuery{}, Answer: TaskList{}, Status: 200,
		Doc: "One page of the queue, in queue order."},
	{Op: "get", Method: "GET", Path: "/tasks/{ref}", Who: Token, Answer: TaskDetail{}, Status: 200,
		Doc: "One task by id or alias, with its data and body."},
	{Op: "add", Method: "POST", Path: "/tasks", Who: Token, Request: AddRequest{}, Answer: Added{}, Status: 201,
		Doc: "Files a task: a person's is vetted and open, an agent's unvetted in the inbox."},
	{Op: "search", Method: "GET", Path: "/search", Who: Token, Query: SearchQuery{}, Answer: SearchResult{}, Status: 200,
		Doc: "Full-text search over every task, best match first."},
	{Op: "claim", Method: "POST", Path: "/claim", Who: Agent, Request: ClaimRequest{}, Answer: Claim{}, Status: 200,
		Doc: "Claims the next ready task for the session, or says why none is ready."},
	{Op: "claim", Method: "POST", Path: "/tasks/{ref}/claim", Who: Agent, Request: ClaimRequest{}, Answer: Claim{}, Status: 200,
		Doc: "Claims one task for the session; claiming a task the session holds gives its lease back as it is."},
	{Op: "release", Method: "POST", Path: "/tasks/{ref}/release", Who: Agent, Request: LeaseRequest{}, Answer: Released{}, Status: 200,
		Doc: "The holder gives the task back, with a reason, fenced by its epoch."},
	{Op: "take_back", Method: "POST", Path: "/tasks/{ref}/release", Who: Person, Request: MoveRequest{}, Answer: Released{}, Status: 200,
		Doc: "A person takes the task back from whoever holds it; the holder's later writes are stale."},
	{Op: "resolve", Method: "POST", Path: "/tasks/{ref}/resolve", Who: Agent, Request: VerifyRequest{}, Answer: Resolved{}, Status: 202,
		Doc: "The holder hands the task to verify: 202 with a started check, or 200 when no check runs (verify disabled, a command waiting for approval)."},
	{Op: "accept", Method: "POST", Path: "/tasks/{ref}/accept", Who: Person, Request: MoveRequest{}, Answer: Moved{}, Status: 200,
		Doc: "A person resolves the task without verify (snag done): open, claimed, verifying or needs_review; verified stays false, the lease ends."},
	{Op: "edit", Method: "POST", Path: "/tasks/{ref}/edit", Who: Person, Request: EditRequest{}, Answer: Edited{}, Status: 200,
		Doc: "A person changes the task's fields (snag edit, snag dep): only the values that change are rewritten; a dependency must name a task and close no cycle."},
	{Op: "capture", Method: "POST", Path: "/captures", Who: Token, Request: CaptureRequest{}, Answer: Captured{}, Status: 201,
		Doc: "Make a capture an inbox task: unvetted, source: capture, its screenshot and the anchor's crop in .snag/shots/. Refused, with nothing written: a URL off browser.allowed_hosts, an image that is not PNG or is over 8 MiB, a selector over 1 KiB."},
	{Op: "capture", Method: "POST", Path: "/captures", Who: Extension, Request: CaptureRequest{}, Answer: Captured{}, Status: 201,
		Doc: "The same from the browser extension, with the capture credential POST /pair gave it and from the chrome-extension:// origin it was paired with (snagd answers the CORS preflight for that origin). A capture credential opens this route and no other (capture_only); one snagd does not know, or none, is not_paired; allow_host is refused (capture_only)."},
	{Op: "move", Method: "POST", Path: "/tasks/{ref}/{action}", Who: Person, Request: MoveRequest{}, Answer: Moved{}, Status: 200,
		Doc: "A person's move: action is promote, reject, cancel or reopen."},
	{Op: "verify", Method: "POST", Path: "/verify/{ref}", Who: Token, Request: VerifyRequest{}, Answer: Resolved{}, Status: 202,
		Doc: "Checks the task now (a person's, for a task claimed, verifying or needs_review; an agent's is its resolve): 202 with a started check, or 200 when no check runs."},
	{Op: "verify_plan", When: "dry_run", Method: "POST", Path: "/verify/{ref}", Who: Token, Request: VerifyRequest{}, Answer: VerifyPlan{}, Status: 200,
		Doc: "With dry_run: what would check the task, and nothing changes; 503 verify_unavailable, with the same body, when the check needs a browser and none is here."},
	{Op: "verify_plan", When: "dry_run", Method: "POST", Path: "/tasks/{ref}/resolve", Who: Agent, Request: VerifyRequest{}, Answer: VerifyPlan{}, Status: 200,
		Doc: "With dry_run: the holder's dry run of its resolve, as POST /verify/{ref} with dry_run, in the session's worktree; nothing changes."},
	{Op: "verify_state", Method: "GET", Path: "/verify/{ref}", Who: Token, Answer: VerifyState{}, Status: 200,
		Doc: "Where verify of the task stands, with its recent runs."},
	{Op: "register", Method: "POST", Path: "/sessions", Who: Token, Request: Registration{}, Answer: Session{}, Status: 201,
		Doc: "Registers an agent's session; its id goes in the session header of every later request."},
	{Op: "sessions", Method: "GET", Path: "/sessions", Who: Token, Answer: Sessions{}, Status: 200,
		Doc: "The live sessions, what each is doing, and every live lease."},
	{Op: "end_session", Method: "POST", Path: "/sessions/{id}/end", Who: Person, Request: EndRequest{}, Answer: Ended{}, Status: 200,
		Doc: "A person ends an agent's session: its tasks go back to the queue."},
	{Method: "GET", Path: "/sessions/{id}/stream", Who: Token, Status: 200,
		Doc: "Holds the session alive: the agent keeps this stream open for its whole life (comments only); when it closes and does not come back within the grace, the session ends and its leases are released."},
	{Op: "audit", Method: "GET", Path: "/audit", Who: Token, Query: AuditQuery{}, Answer: AuditLog{}, Status: 200,
		Doc: "The audit log of live actions, oldest first: the repository's (every worktree's; in team mode the team's), kept in the live state, so a rebuilt index loses none of it."},
	{Op: "reindex", Method: "POST", Path: "/reindex", Who: Token, Request: MoveRequest{}, Answer: Reindexed{}, Status: 200,
		Doc: "Rebuilds the index from the task files; live state is kept and leases are reconciled with the files."},
	{Op: "rescan", Method: "POST", Path: "/rescan", Who: Token, Answer: Rescanned{}, Status: 200,
		Doc: "Reads every task file again now, as the watcher's timer would."},
	{Method: "GET", Path: "/events", Who: Token, Status: 200,
		Doc: "A stream of server-sent events (see Event); ?since=N or Last-Event-ID continues after event N, and a resync event says events were missed."},
	{Op: "context", Method: "POST", Path: "/context", Who: Agent, Request: ContextRequest{}, Answer: Context{}, Status: 200,
		Doc: "The agent's screen of the team: who it is (the first call may adopt a name), its work, what is ready, the other agents and what each holds, handoffs to it not yet seen (now marked seen), the latest reports."},
	{Op: "files", Method: "GET", Path: "/files", Who: Token, Answer: FileClaims{}, Status: 200,
		Doc: "Every live file claim."},
	{Op: "claim_files", Method: "POST", Path: "/files/claim", Who: Agent, Request: FilesRequest{}, Answer: FilesClaimed{}, Status: 200,
		Doc: "Claims paths, folders or globs for the session, all or nothing; a claim in the way is answered with granted false, naming each holder."},
	{Op: "release_files", Method: "POST", Path: "/files/release", Who: Agent, Request: FilesRequest{}, Answer: FilesReleased{}, Status: 200,
		Doc: "Releases the session's claims of the paths, or all of them when none are named."},
	{Op: "check_files", Method: "POST", Path: "/files/check", Who: Token, Request: FilesRequest{}, Answer: FilesChecked{}, Status: 200,
		Doc: "The live claims that overlap each path."},
	{Op: "force_release_files", Method: "POST", Path: "/files/force-release", Who: Person, Request: ForceReleaseRequest{}, Answer: FilesReleased{}, Status: 200,
		Doc: "A person frees a claimed path from whoever holds it, with a reason, into the audit log."},
	{Op: "guard", Method: "POST", Path: "/guard", Who: Token, Request: GuardRequest{}, Answer: Guarded{}, Status: 200,
		Doc: "A commit guard's check: the staged paths another live agent claims exclusively."},
	{Op: "report", Method: "POST", Path: "/reports", Who: Agent, Request: ReportRequest{}, Answer: Message{}, Status: 201,
		Doc: "An agent reports progress, for people and the other agents."},
	{Op: "reports", Method: "GET", Path: "/reports", Who: Token, Query: MessageQuery{}, Answer: Messages{}, Status: 200,
		Doc: "The latest reports, newest first."},
	{Op: "handoff", Method: "POST", Path: "/handoffs", Who: Token, Request: HandoffRequest{}, Answer: HandedOff{}, Status: 201,
		Doc: "A note to an agent by name, shown in its next context until seen; with task, the task's lease moves to that agent (a new epoch) when it is live."},
	{Op: "handoffs", Method: "GET", Path: "/handoffs", Who: Token, Query: MessageQuery{}, Answer: Messages{}, Status: 200,
		Doc: "The latest handoffs, newest first."},
	{Op: "plans", Method: "GET", Path: "/plans", Who: Token, Answer: PlanList{}, Status: 200,
		Doc: "The plans (.snag/plans/*.md), newest first, each with its tasks counted by status."},
	{Op: "plan", Method: "GET", Path: "/plans/{slug}", Who: Token, Answer: PlanDetail{}, Status: 200,
		Doc: "One plan with its body."},
	{Op: "create_plan", Method: "POST", Path: "/plans", Who: Token, Request: PlanRequest{}, Answer: PlanDetail{}, Status: 201,
		Doc: "Writes a new plan, a draft: an agent's is unvetted until a person activates it."},
	{Op: "update_plan", Method: "POST", Path: "/plans/{slug}", Who: Token, Request: PlanRequest{}, Answer: PlanDetail{}, Status: 200,
		Doc: "Changes a plan's title, body or status; an agent changes only unvetted plans, and only a person makes one active or done."},
	{Op: "notes", Method: "GET", Path: "/notes", Who: Token, Query: NoteQuery{}, Answer: NoteList{}, Status: 200,
		Doc: "The notes of the decision graph (.snag/notes of every worktree), newest first, by type, branch or task."},
	{Op: "note", Method: "GET", Path: "/notes/{ref}", Who: Token, Answer: NoteDetail{}, Status: 200,
		Doc: "One note by key (N-7) or id, with its body and its edges both ways."},
	{Op: "add_note", Method: "POST", Path: "/notes", Who: Token, Request: NoteRequest{}, Answer: NoteDetail{}, Status: 201,
		Doc: "Writes a note with the next free key and its links, in the writer's worktree: an agent's is unvetted, names its branch and takes the branch's write lease."},
	{Op: "link", Method: "POST", Path: "/links", Who: Token, Request: LinkRequest{}, Answer: NoteDetail{}, Status: 200,
		Doc: "Adds an edge to the file of the note it starts from (in the writer's worktree); one already there changes nothing."},
	{Op: "graph", Method: "GET", Path: "/graph", Who: Token, Query: NoteQuery{}, Answer: Graph{}, Status: 200,
		Doc: "The decision graph: every note (or those of a type, branch or task) and the edges among them; ?format=dot, mermaid or svg draws it."},
	{Op: "branches", Method: "GET", Path: "/branches", Who: Token, Query: BranchQuery{}, Answer: ActivityFeed{}, Status: 200,
		Doc: "What is live (task leases, file claims, branch write leases) and the activity of the latest ?branches=N branches (20, at most 200)."},
	{Op: "worktrees", Method: "GET", Path: "/worktrees", Who: Token, Answer: Worktrees{}, Status: 200,
		Doc: "The tasks' git worktrees (branches snag/<key>), with their tasks and whether each is merged and clean."},
	{Op: "prune_worktrees", Method: "POST", Path: "/worktrees/prune", Who: Person, Request: MoveRequest{}, Answer: Pruned{}, Status: 200,
		Doc: "Removes the worktrees of resolved and cancelled tasks that are clean and merged, with their branches."},
	{Method: "POST", Path: "/login-codes", Who: Person, Request: MoveRequest{}, Answer: LoginCode{}, Status: 201,
		Doc: "Mints a one-time link that logs a browser in to the board (snag open)."},
	{Method: "POST", Path: "/pairing-codes", Who: Person, Request: MoveRequest{}, Answer: PairingCode{}, Status: 201,
		Doc: "Mints a one-time pairing code for the browser extension (snag pair): it works once, for 5 minutes; at most 3 are open, and a fourth voids the oldest."},
	{Method: "POST", Path: "/pair", Who: Extension, Request: PairRequest{}, Answer: Paired{}, Status: 201,
		Doc: "The extension's popup exchanges a pairing code for a capture credential bound to its chrome-extension:// origin; no token. A wrong, used or expired code gets the same bad_pairing_code; codes are taken 5 at once and then one every 2 s (too_many_tries), and 10 wrong ones void every open code. snagd keeps the credential's SHA-256 only, in capture-credentials.json beside the token."},
	{Method: "GET", Path: "/capture-credentials", Who: Person, Answer: CaptureCredentials{}, Status: 200,
		Doc: "The paired extensions of this user, for every project (snag pair --list); never a credential, which snagd does not keep."},
	{Method: "DELETE", Path: "/capture-credentials", Who: Person, Answer: Revoked{}, Status: 200,
		Doc: "Revokes every capture credential, of every project, and voids the open pairing codes (snag pair --revoke)."},
	{Method: "POST, GET, DELETE", Path: "/mcp", Who: Token,
		Doc: "The MCP server over Streamable HTTP (the same tools as snag mcp); its sessions are agents' sessions. snagd --listen serves it alone on a second listener, over TLS with a hosted token of its own, to agents on other machines."},
}
