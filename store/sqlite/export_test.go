package sqlite

// Migration1 is the SQL of schema version 1, the schema before encryption
// at rest of secret env values.
var Migration1 = migrations[0]

// Migration2 is the SQL of schema version 2, the last before typed fields.
var Migration2 = migrations[1]
