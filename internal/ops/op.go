package ops

import (
	"context"
	"fmt"
	"reflect"
)

// Op is one operation of snagd, with the types of its request and its
// answer. Every operation is declared once, in this package; the API's
// routes name it (api.Route.Op), snagd serves it in process, the client
// sends it over HTTP, and the MCP tools and the board call it through
// either, as a [Service].
type Op[Req, Ans any] struct {
	// Name is how routes, the audit log and [Service.Do] name it.
	Name string
}

// Desc is an operation with its types as values: what a route table, a
// generic handler or a generic client needs of it.
type Desc struct {
	// Name is the operation's name.
	Name string
	// Req and Ans are the types of its request and its answer.
	Req, Ans reflect.Type
}

var descs = map[string]Desc{}

// op declares an operation; a name declared twice is a programming error.
func op[Req, Ans any](name string) Op[Req, Ans] {
	if _, dup := descs[name]; dup {
		panic("ops: operation declared twice: " + name)
	}
	descs[name] = Desc{Name: name, Req: reflect.TypeFor[Req](), Ans: reflect.TypeFor[Ans]()}
	return Op[Req, Ans]{Name: name}
}

// Lookup returns the operation named name.
func Lookup(name string) (Desc, bool) {
	d, ok := descs[name]
	return d, ok
}

// Service runs operations: snagd's in process, or snagd's over HTTP (the
// client). req is a value of the operation's request type; the answer is a
// value of its answer type. A refusal or a failure is an [*Error].
type Service interface {
	Do(ctx context.Context, op string, req any) (any, error)
}

// Call runs op on s with its request and answer typed.
func Call[Req, Ans any](ctx context.Context, s Service, op Op[Req, Ans], req Req) (Ans, error) {
	var zero Ans
	out, err := s.Do(ctx, op.Name, req)
	if err != nil {
		return zero, err
	}
	if st, ok := out.(Statused); ok {
		if _, e := st.AnswerStatus(0); e != nil {
			return zero, e
		}
	}
	a, ok := out.(Ans)
	if !ok {
		return zero, fmt.Errorf("operation %s answered %T, not %T: the service and this caller disagree on its types", op.Name, out, zero)
	}
	return a, nil
}

// None is the request of an operation that takes nothing.
type None struct{}

// Handler is the body of one operation on a service's side.
type Handler func(ctx context.Context, req any) (any, error)

// Handlers maps operations to their bodies: snagd's in-process service
// is one.
type Handlers map[string]Handler

// Handle sets the body of op in hs, typed.
func Handle[Req, Ans any](hs Handlers, op Op[Req, Ans], h func(ctx context.Context, req Req) (Ans, error)) {
	hs[op.Name] = func(ctx context.Context, req any) (any, error) {
		r, ok := req.(Req)
		if !ok {
			return nil, fmt.Errorf("operation %s was given %T, not %T", op.Name, req, r)
		}
		return h(ctx, r)
	}
}

// Caller is who an operation acts for.
type Caller struct {
	// Session is the agent's session; 0 is a person.
	Session int64
	// Tool is the MCP tool call the operation serves, for the audit log.
	Tool string
	// Extension is the chrome-extension:// origin of a paired browser
	// extension's request, or "".
	Extension string
	// Via names the surface the call came through, for the audit log:
	// "http", "mcp", "board".
	Via string
	// Handle is the handle the call names (a lease's or an agent's, from
	// an earlier answer): with no Session, the operation acts for the
	// handle's agent; a lease handle names the lease it acts on.
	Handle string
	// Cred names the credential the request came with (the local token,
	// or a hosted listener's): a handle is good only with the one that
	// made it. Surfaces set it; a caller cannot choose it.
	Cred string
}

type callerKey struct{}

// WithCaller returns ctx acting for c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf is the caller ctx acts for: a person when none was set.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Error is a refused or failed operation as every surface sees it: the
// status it is answered with over HTTP, snagd's code (not_found,
// transition, held ...) and a message that names the fix.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrorCode is the error's code, for a surface that words errors its own
// way.
func (e *Error) ErrorCode() string { return e.Code }

// Statused is an answer whose status is not always its route's: a
// resolve that started no check (200, not 202), a verify dry run that
// finds no browser (503).
type Statused interface {
	// AnswerStatus is the answer's status, def when it is its route's;
	// from 400 on, with the error that a caller reading answers as values
	// gets instead (HTTP sends the answer itself with the status).
	AnswerStatus(def int) (int, *Error)
}
