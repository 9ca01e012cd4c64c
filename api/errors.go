package api

// Error is the body of every error answer (4xx and 5xx): a code a program
// branches on, and a sentence that says what went wrong and what fixes it.
// A 503 answer with Retry-After (starting, busy, changing) changed nothing
// and may be sent again after the wait.
type Error struct {
	// Code is one of the Code* constants.
	Code string `json:"error"`
	// Message says what went wrong and names the fix.
	Message string `json:"message"`
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// The error codes (Error.Code), with the HTTP status each comes with.
const (
	// CodeUnauthorized (401): no token, or not the one in the token file
	// the message names.
	CodeUnauthorized = "unauthorized"
	// CodeBadHost (403): the Host header is not 127.0.0.1 or localhost
	// with snagd's port.
	CodeBadHost = "bad_host"
	// CodeBadOrigin (403): a browser's request from another origin (a
	// browser extension's is taken on POST /captures and POST /pair
	// alone), or a capture credential sent from an origin it was not
	// paired with.
	CodeBadOrigin = "bad_origin"
	// CodeCaptureOnly (403): a capture credential on any route but POST
	// /captures, or a capture with it that sets allow_host.
	CodeCaptureOnly = "capture_only"
	// CodeNotPaired (401): the browser extension sent no capture
	// credential, or one snagd does not know (never paired, or revoked by
	// snag pair --revoke): pair again with snag pair.
	CodeNotPaired = "not_paired"
	// CodeBadPairingCode (403): POST /pair with a code snagd has not open:
	// mistyped, used, older than 5 minutes, or voided by snag pair
	// --revoke or by too many wrong codes. snag pair makes a new one.
	CodeBadPairingCode = "bad_pairing_code"
	// CodeTooManyTries (429, with Retry-After): pairing codes came faster
	// than snagd takes them.
	CodeTooManyTries = "too_many_tries"
	// CodePersonOnly (403): an agent's session asked for a person's move.
	CodePersonOnly = "person_only"
	// CodeBadContentType (415): a write whose body is not
	// application/json.
	CodeBadContentType = "bad_content_type"
	// CodeTooLarge (413): a request body over 1 MiB (24 MiB for POST
	// /captures), or a capture's image over 8 MiB, or that decodes to over
	// 160 MiB (its pixels times their depth).
	CodeTooLarge = "too_large"
	// CodeBadJSON (400): a body that does not decode, has an unknown
	// field, or a value a task file cannot hold.
	CodeBadJSON = "bad_json"
	// CodeBadQuery (400): an unknown query parameter, one given twice, or
	// a search query with no word.
	CodeBadQuery = "bad_query"
	// CodeBadStatus (400): an unknown status in ?status=.
	CodeBadStatus = "bad_status"
	// CodeBadKind (400): an unknown kind.
	CodeBadKind = "bad_kind"
	// CodeBadWave (400): ?wave=, or a new task's wave, is not a whole
	// number from 0.
	CodeBadWave = "bad_wave"
	// CodeBadLimit (400): ?limit= is not a whole number in range.
	CodeBadLimit = "bad_limit"
	// CodeBadAll (400): ?all= is not 1, true, yes, 0, false or no.
	CodeBadAll = "bad_all"
	// CodeBadAfter (400): ?after= is not a whole number.
	CodeBadAfter = "bad_after"
	// CodeBadTail (400): ?tail= of GET /audit is not a whole number in
	// range.
	CodeBadTail = "bad_tail"
	// CodeBadSince (400): ?since= of GET /events is not an event id.
	CodeBadSince = "bad_since"
	// CodeBadSeverity (400): an unknown severity.
	CodeBadSeverity = "bad_severity"
	// CodeBadFile (400): a suspect file that is not path or
	// path:line-line, or leaves the repository.
	CodeBadFile = "bad_file"
	// CodeBadRef (400): not a task reference (an id or SNAG-12).
	CodeBadRef = "bad_ref"
	// CodeBadSession (400): a session id in the path that is not a
	// number.
	CodeBadSession = "bad_session"
	// CodeNoSession (400 or 404): an agent's move without the session
	// header, or no live session of that id.
	CodeNoSession = "no_session"
	// CodeNoReason (400): a release without a reason.
	CodeNoReason = "no_reason"
	// CodeNotFound (404): no such task, route or move.
	CodeNotFound = "not_found"
	// CodeSessionEnded (410): the session has ended (its leases were
	// released): register again.
	CodeSessionEnded = "session_ended"
	// CodeNotClean (409): a reference two files answer to, or a project
	// that is not clean for the move.
	CodeNotClean = "not_clean"
	// CodeHeld (409): another session holds the task.
	CodeHeld = "held"
	// CodeHolding (409): the session holds as many tasks as the project
	// lets one agent hold (claim.max_per_session).
	CodeHolding = "holding"
	// CodeNotHeld (409): a release or resolve of a task the session does
	// not hold.
	CodeNotHeld = "not_held"
	// CodeStale (409): the lease's epoch is old: claim the task again.
	CodeStale = "stale"
	// CodeStaleHandle (409): the handle names nothing live (never made
	// here, its agent ended, or its lease ended): claim anew.
	CodeStaleHandle = "stale_handle"
	// CodeForeignHandle (403): the handle was made with another
	// credential (another token, or one rotated since).
	CodeForeignHandle = "foreign_handle"
	// CodeBadHandle (400): a lease handle named for another operation
	// than its lease's own: name the agent by its agent handle.
	CodeBadHandle = "bad_handle"
	// CodeBlocked (409): the task's dependencies are not resolved: claim
	// it with force, or another.
	CodeBlocked = "blocked"
	// CodeMissing (409): the task's file left tasks/.
	CodeMissing = "missing"
	// CodeTransition (409): the move is not allowed from the task's
	// status.
	CodeTransition = "transition"
	// CodeNoCaptureURL (409): a resolve that nothing can check.
	CodeNoCaptureURL = VerifyNoCaptureURL
	// CodeVerifyUnavailable (503, no Retry-After): the check needs a
	// browser and none is here.
	CodeVerifyUnavailable = VerifyUnavailable
	// CodeStarting (503): snagd is reading the task files, or, in team
	// mode, reconciling its leases with the coordination store at its
	// start.
	CodeStarting = "starting"
	// CodeBusy (503): snag.db stayed locked; nothing was done.
	CodeBusy = "busy"
	// CodeChanging (503): an editor kept saving the file while snag wrote
	// it; nothing was changed.
	CodeChanging = "changing"
	// CodeDiskFull (507): the disk is full.
	CodeDiskFull = "disk_full"
	// CodeNoStream (500): the connection cannot stream events.
	CodeNoStream = "no_stream"
	// CodeInternal (500): anything else; the message says what.
	CodeInternal = "internal"

	// CodeBadURL (400): a capture's URL is not an http or https address.
	CodeBadURL = "bad_url"
	// CodeHostNotAllowed (400): a capture's URL is on a host that is not
	// on browser.allowed_hosts.
	CodeHostNotAllowed = "host_not_allowed"
	// CodeBadAnchor (400): a capture's anchor has a selector over 1 KiB or
	// with a control character, or a box that is not a rectangle.
	CodeBadAnchor = "bad_anchor"
	// CodeBadViewport (400): a capture's viewport is not a window's size.
	CodeBadViewport = "bad_viewport"
	// CodeBadCapture (400): a capture's page title or user agent is too
	// long.
	CodeBadCapture = "bad_capture"
	// CodeNoScreenshot (400): a capture without a screenshot.
	CodeNoScreenshot = "no_screenshot"
	// CodeNotPNG (400): a capture's image is not a PNG, or not base64.
	CodeNotPNG = "not_png"
	// CodeBadPNG (400): a capture's PNG cannot be read to its end.
	CodeBadPNG = "bad_png"
	// CodeBadWorktree (400): the request's X-Snag-Worktree names no
	// worktree of the repository this snagd serves, or a folder without
	// .snag/.
	CodeBadWorktree = "bad_worktree"
	// CodeWorktreeFailed (500): snagd could not open the worktree the
	// request is for; the message says why and what fixes it.
	CodeWorktreeFailed = "worktree_failed"

	// CodeBadToolsets (400): /mcp?toolsets= names a toolset snag lacks.
	CodeBadToolsets = "bad_toolsets"
	// CodeNoPaths (400): a file claim or check names no paths.
	CodeNoPaths = "no_paths"
	// CodeTooManyPaths (400): a file claim names over 100 paths.
	CodeTooManyPaths = "too_many_paths"
	// CodeBadPath (400): a path is not one snag claims: outside the
	// repository, absolute, with NUL, the whole repository, a bad glob.
	CodeBadPath = "bad_path"
	// CodeBadTTL (400): ttl_sec is out of 1 to 86400.
	CodeBadTTL = "bad_ttl"
	// CodeExpired (in a claim's answer): the session's claim expired
	// before its renewal came; it has ended, and the next claim is new.
	CodeExpired = "expired"
	// CodeFilesHeld (in a claim's answer, 409 elsewhere): another agent's
	// live claim overlaps the paths.
	CodeFilesHeld = "files_held"
	// CodeNotClaimed (404): a person's release of a path no one claims.
	CodeNotClaimed = "not_claimed"
	// CodeNameKept (in a context's name_note): the session keeps its name.
	CodeNameKept = "name_kept"
	// CodeBadName (400): a name asked for is not letters, digits, - and _.
	CodeBadName = "bad_name"
	// CodeNoMessage (400): a report says nothing.
	CodeNoMessage = "no_message"
	// CodeLongMessage (400): a report's message is over 500 bytes.
	CodeLongMessage = "long_message"
	// CodeLongDetail (400): a report's detail is over 8000 bytes.
	CodeLongDetail = "long_detail"
	// CodeNoAddressee (400): a handoff names no agent.
	CodeNoAddressee = "no_addressee"
	// CodeNoTitle (400): a handoff has no title.
	CodeNoTitle = "no_title"
	// CodeLongTitle (400): a handoff's title is over 200 bytes.
	CodeLongTitle = "long_title"
	// CodeLongBody (400): a handoff's body is over 8000 bytes, or a
	// capture's note over 64 KiB.
	CodeLongBody = "long_body"
	// CodeToSelf (400): an agent hands off to itself.
	CodeToSelf = "to_self"
	// CodeCycle (400): a task's depends_on would make a cycle; the
	// message names it.
	CodeCycle = "cycle"
	// CodeBadTitle (400): a task's title that is empty, over 300 bytes, or
	// has a control character.
	CodeBadTitle = "bad_title"
	// CodeBadPlan (400): a plan's slug that is malformed, or (from an
	// agent) names no plan.
	CodeBadPlan = "bad_plan"
	// CodeNotADependency (400): a dependency to remove that the task's
	// depends_on does not name; the message says what it names.
	CodeNotADependency = "not_a_dependency"
	// CodeBadType (400): a note type that is not one of the seven.
	CodeBadType = "bad_type"
	// CodeBadLink (400): a link of an unknown kind, with no target, or
	// with a why that is too long.
	CodeBadLink = "bad_link"
	// CodeNoSource (404): a link (took_from among them) to a note that is
	// on no branch.
	CodeNoSource = "no_source"
	// CodeNoNote (404): no note by that key or id.
	CodeNoNote = "no_note"
	// CodeNotHere (400): a link from a note that is not in the writer's
	// worktree; edges live in the note they start from.
	CodeNotHere = "not_here"
	// CodeBadTree (400): a worktree that is not one of snagd's repository.
	CodeBadTree = "bad_tree"
	// CodeMissingBranch (400): an agent's graph write that names no branch.
	CodeMissingBranch = "missing_branch"
	// CodeBadBranch (400): a branch name with spaces or control characters.
	CodeBadBranch = "bad_branch"
	// CodeBranchHeld (409): another session holds the branch's advisory
	// write lease; the message names it and the seconds left.
	CodeBranchHeld = "branch_held"
	// CodeBadNote (400): the note's file does not read cleanly; snag doctor
	// says how to mend it.
	CodeBadNote = "bad_note"
	// CodeWrongWorkspace (421): /mcp was asked for another workspace than
	// this project's; the message names both.
	CodeWrongWorkspace = "wrong_workspace"
	// CodeBadBranches (400): ?branches= out of 1 to 200.
	CodeBadBranches = "bad_branches"
	// CodeBadFormat (400): ?format= of GET /graph is not dot, mermaid or
	// svg.
	CodeBadFormat = "bad_format"
	// CodeNotLive (409): a task handed to an agent with no live session;
	// nothing moved.
	CodeNotLive = "not_live"
	// CodeBadMethod (405): a method other than POST, GET and DELETE on
	// the hosted listener's /mcp.
	CodeBadMethod = "bad_method"
	// CodeCoordUnreachable (503, with Retry-After and CoordHeader): in
	// team mode, snagd cannot reach the coordination store; nothing is
	// granted until it is back. The agent retries.
	CodeCoordUnreachable = "coord_unreachable"
	// CodeResolvedElsewhere (409): in team mode, the task was resolved
	// through another clone; pull to see it, or a person reopens it.
	CodeResolvedElsewhere = "resolved_elsewhere"
)

// Codes lists every error code, for the reference and its test.
var Codes = []string{
	CodeUnauthorized, CodeBadHost, CodeBadOrigin, CodeCaptureOnly, CodeNotPaired, CodeBadPairingCode, CodeTooManyTries, CodePersonOnly, CodeBadContentType, CodeTooLarge,
	CodeBadJSON, CodeBadQuery, CodeBadStatus, CodeBadKind, CodeBadWave, CodeBadLimit, CodeBadAll,
	CodeBadAfter, CodeBadTail, CodeBadSince, CodeBadSeverity, CodeBadFile, CodeBadRef, CodeBadSession, CodeNoSession,
	CodeNoReason, CodeNotFound, CodeSessionEnded, CodeNotClean, CodeHeld, CodeHolding, CodeNotHeld,
	CodeStale, CodeStaleHandle, CodeForeignHandle, CodeBadHandle, CodeBlocked, CodeMissing, CodeTransition, CodeNoCaptureURL, CodeVerifyUnavailable,
	CodeStarting, CodeBusy, CodeChanging, CodeDiskFull, CodeNoStream, CodeInternal,
	CodeBadToolsets, CodeNoPaths, CodeTooManyPaths, CodeBadPath, CodeBadTTL, CodeExpired, CodeFilesHeld,
	CodeNotClaimed, CodeNameKept, CodeBadName, CodeNoMessage, CodeLongMessage, CodeLongDetail, CodeNoAddressee,
	CodeNoTitle, CodeLongTitle, CodeLongBody, CodeToSelf, CodeNotLive, CodeCycle,
	CodeBadType, CodeBadLink, CodeNoSource, CodeNoNote, CodeNotHere, CodeBadTree, CodeMissingBranch, CodeBadBranch,
	CodeBranchHeld, CodeBadNote, CodeWrongWorkspace, CodeBadBranches, CodeBadFormat, CodeBadMethod, CodeCoordUnreachable, CodeResolvedElsewhere,
	CodeBadURL, CodeHostNotAllowed, CodeBadAnchor, CodeBadViewport, CodeBadCapture, CodeNoScreenshot, CodeNotPNG, CodeBadPNG,
	CodeBadWorktree, CodeWorktreeFailed, CodeBadTitle, CodeBadPlan, CodeNotADependency,
}

// The headers of an agent's request.
const (
	// SessionHeader carries the id POST /sessions gave the agent: snagd
	// acts for that session. A request without it is a person's.
	SessionHeader = "X-Snag-Session"
	// WorkspaceHeader names the workspace an MCP client over HTTP means
	// to reach; snagd refuses a request naming another than its own.
	WorkspaceHeader = "X-Snag-Workspace"
	// ToolHeader names the MCP tool call a request serves, for the audit
	// log; it is read only with SessionHeader.
	ToolHeader = "X-Snag-Tool"
	// HandleHeader names a handle an earlier answer gave (a claim's lease
	// handle): the request acts on that lease, and a lease its agent's
	// earlier connection held (a bridge that restarted) comes back to this
	// session. A handle is good only with the token that made it.
	HandleHeader = "X-Snag-Handle"
	// CoordHeader, on an answer to an agent, says that snagd cannot reach
	// the coordination store it shares with the other clones, and what that
	// means for the agent's leases ("coordination unreachable for 9 s: your
	// lease of SNAG-3 will be given up at 15 s"); any answer that failed
	// because the store is out of reach (a person's add, which needs a key
	// from it) carries it too. A 503 that carries it is the caller's to
	// retry: a client does not wait it out itself.
	CoordHeader = "X-Snag-Coord"
	// WorktreeHeader names the project root, in one worktree of the
	// repository, that a request is for (the path, percent-encoded as a URL
	// path segment is): one snagd serves every worktree of a repository, and
	// reads and writes the files of the worktree its caller is in. A request
	// without it is for the repository's main worktree.
	WorktreeHeader = "X-Snag-Worktree"
)
