package toolrun

import (
	"errors"
	"slices"
	"strings"

	"github.com/toolrun/toolrun/internal/redact"
)

// redactor collects every secret value the thread knows. It is cached on
// the batch until the thread env changes.
func (e *Executor) redactor(b *batch) redactor {
	b.mu.Lock()
	defer b.mu.Unlock()
	return e.redactorLocked(b)
}

// redactorLocked is redactor, for a caller holding b.mu.
func (e *Executor) redactorLocked(b *batch) redactor {
	if b.redOK {
		return b.red
	}
	// Every secret value of every link is redacted, also one a nearer link
	// hides: the tool may have read it another way.
	var secrets []redact.Secret
	add := func(name, value string, t VarType) {
		if typeOr(t) != VarText && len(value) >= redactMinLen {
			secrets = append(secrets, redact.Secret{Name: name, Value: value})
		}
	}
	for k, v := range b.env {
		add(k, v.Value, v.Type)
	}
	for _, d := range b.sc.defaults {
		for k, v := range d {
			add(k, v, VarSecret)
		}
	}
	for k, v := range b.userEnv {
		add(k, v.Value, v.Type)
	}
	for k, v := range e.env {
		add(k, v.Value, v.Type)
	}
	if b.retired && b.red != nil {
		// A secret the env no longer holds stays redacted for the rest of
		// the batch: the last redactor knew it (see callState.SetEnv).
		secrets = append(secrets, b.red.secrets...)
	}
	slices.SortFunc(secrets, func(a, b redact.Secret) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	secrets = slices.Compact(secrets)
	b.red = redactors.get(secrets)
	b.redOK = true
	return b.red
}

// redactedError carries an error whose text had secrets in it: Error is
// redacted, errors.Is and errors.As still see the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }

func redactError(err error, red redactor) error {
	if !red.Active() {
		return err
	}
	msg := red.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}
