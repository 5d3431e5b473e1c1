package toolrun

import "strings"

func (e *Executor) missingVariables(b *batch, vars []Variable) []string {
	var missing []string
	for _, v := range vars {
		if !v.Required {
			continue
		}
		if _, _, ok := e.resolveEnv(b, v.Name); !ok {
			missing = append(missing, v.Name)
		}
	}
	return missing
}

// resolveEnv walks the env chain (spec: thread, agent defaults, prompt
// defaults, user account, runtime instance).
func (e *Executor) resolveEnv(b *batch, name string) (string, VarType, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.env[name]; ok {
		return v.Value, typeOr(v.Type), true
	}
	for _, d := range b.sc.defaults {
		if v, ok := d[name]; ok {
			return v, VarSecret, true
		}
	}
	if v, ok := b.userEnv[name]; ok {
		return v.Value, typeOr(v.Type), true
	}
	if v, ok := e.env[name]; ok {
		return v.Value, typeOr(v.Type), true
	}
	return "", VarSecret, false
}

// typeOr returns the type a value of type t counts as: VarText for
// VarText, VarSecret for every other type. An empty type means secret, and
// so does one that is neither "text" nor "secret" (a typo such as "Secret",
// a made-up "password"): the durable stores encrypt every type but text at
// rest, and such a value is redacted and warned about as a secret too.
func typeOr(t VarType) VarType {
	if t == VarText {
		return VarText
	}
	return VarSecret
}

// knownType reports whether t is a type a write may name: text, secret, or
// empty (secret).
func knownType(t VarType) bool { return t == "" || t == VarText || t == VarSecret }

// flagOn reports whether an env flag (an Optional entry's, a
// relationship's) is on for the batch: it resolves to true, 1 or yes, in
// any case, surrounding spaces ignored. The empty flag is always on.
func (e *Executor) flagOn(b *batch, flag string) bool {
	if flag == "" {
		return true
	}
	v, _, ok := e.resolveEnv(b, flag)
	if !ok {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	}
	return false
}
