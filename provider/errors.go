package provider

import (
	"fmt"
	"strings"
)

// Problem is one missing or invalid input.
type Problem struct {
	// Input is the input's schema name, e.g. "backupClaimName".
	Input string
	// Message says what is wrong and how to fix it; it starts with the input's name.
	Message string
}

// InputError lists every missing or invalid input of one component. The
// components return it (before registering anything) so that `pulumi preview`
// fails with every problem at once.
type InputError struct {
	// Component is the lower-case component name used as the message prefix,
	// e.g. "worldbackup".
	Component string
	Problems  []Problem
}

// Error renders one problem on one line, several as a list.
func (e *InputError) Error() string {
	if len(e.Problems) == 1 {
		return e.Component + ": " + e.Problems[0].Message
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d invalid inputs:", e.Component, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// Inputs returns the names of the inputs with problems, in order.
func (e *InputError) Inputs() []string {
	names := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		names[i] = p.Input
	}
	return names
}

// problems collects the Problems of one validation pass.
type problems struct {
	component string
	list      []Problem
}

// addf records a problem with input; the message is "<input> <format...>".
func (p *problems) addf(input, format string, args ...any) {
	p.list = append(p.list, Problem{Input: input, Message: input + " " + fmt.Sprintf(format, args...)})
}

// err returns an *InputError, or nil when there is no problem.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &InputError{Component: p.component, Problems: p.list}
}
