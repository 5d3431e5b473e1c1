package toolrun

// definitionKind names the kind of a non-tool definition.
func definitionKind(d Definition) string {
	return "definition"
}

// prepare checks and compiles a non-tool definition before registration.
func (r *Registry) prepare(e *entry) error {
	return &RegistrationError{Name: e.name, Reason: "unsupported definition type"}
}
